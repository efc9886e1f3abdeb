// This machine, from every live source at hand: hwloc (or sysfs without
// it) for CPUs, NUMA nodes and the PCI tree, sysfs for link maximums and
// hidden NUMA ids, /proc for the kernel command line, NVML for GPUs.
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

struct LiveSources {
  std::string sys_root = "/sys";  // tests point these at fake trees
  std::string proc_root = "/proc";
  std::string nvml_library;  // empty: $MCI_NVML_LIBRARY or libnvidia-ml.so.1
  bool use_hwloc = true;     // used only when built in and reading /sys
};

Topology read_live(const LiveSources& s);

}  // namespace mci::topo
