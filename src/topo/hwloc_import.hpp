// CPUs, NUMA nodes and the PCI tree through hwloc, live or from a file
// written by `lstopo --of xml`. Built only with hwloc (MCI_WITH_HWLOC).
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

// Whether this build has hwloc.
bool hwloc_built();

// An empty `xml_file` reads this machine. Throws ConfigError when hwloc
// cannot load the file, or when mci was built without hwloc.
Topology read_hwloc(const std::string& xml_file);

// Writes this machine as hwloc XML (what `lstopo --of xml` writes), for
// machines without lstopo. Throws ConfigError without hwloc or when the
// file cannot be written.
void export_hwloc_xml(const std::string& path);

}  // namespace mci::topo
