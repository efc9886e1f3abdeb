// A build without hwloc: the live view comes from sysfs, and hwloc's XML
// files cannot be read.
#include "mci/errors.hpp"
#include "topo/hwloc_import.hpp"

namespace mci::topo {

bool hwloc_built() { return false; }

Topology read_hwloc(const std::string& xml_file) {
  throw ConfigError("'" + xml_file +
                    "' needs hwloc, and this mci was built without it: install libhwloc-dev and reconfigure with "
                    "-DMCI_WITH_HWLOC=AUTO (or ON), or pass NCCL's XML with --nccl-xml");
}

void export_hwloc_xml(const std::string& path) {
  throw ConfigError("writing '" + path +
                    "' needs hwloc, and this mci was built without it: install libhwloc-dev and reconfigure with "
                    "-DMCI_WITH_HWLOC=AUTO (or ON)");
}

}  // namespace mci::topo
