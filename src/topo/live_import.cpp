#include "topo/live_import.hpp"

#include "topo/hwloc_import.hpp"
#include "topo/nvml_import.hpp"
#include "topo/sysfs_import.hpp"

namespace mci::topo {

Topology read_live(const LiveSources& s) {
  // hwloc reads the real /sys only; a fake tree is sysfs's business.
  const bool hwloc = s.use_hwloc && hwloc_built() && s.sys_root == "/sys";
  Topology t = hwloc ? read_hwloc("") : read_sysfs(s.sys_root);
  if (hwloc) add_sysfs_link_facts(t, s.sys_root);
  add_host_facts(t, s.proc_root);
  const bool pci_gpus = !t.gpus().empty();
  if (!add_nvml(t, nvml_library_path(s.nvml_library))) {
    if (pci_gpus) {
      // The PCI tree still shows the GPUs; NVML would have added NVLinks.
      t.notes.push_back(t.no_gpu_reason + "; the GPUs shown come from the PCI tree alone (no NVLinks, no P2P status)");
      t.no_gpu_reason.clear();
    } else {
      t.no_gpu_reason = "no NVIDIA GPU on the PCI bus, and " + t.no_gpu_reason;
    }
  }
  t.finish();
  return t;
}

}  // namespace mci::topo
