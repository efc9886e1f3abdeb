// NCCL's topology XML: what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE
// reads (<system version="1"> with cpu, pci, gpu/nvlink and nic/net).
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

// `what` names the input in errors and in Topology::source.
Topology read_nccl_xml(const std::string& text, const std::string& what);
Topology read_nccl_xml_file(const std::string& path);

// A file NCCL accepts as NCCL_TOPO_FILE. PCI bridges and host bridges are
// folded the way NCCL folds them: only switches appear.
std::string write_nccl_xml(const Topology& t);

// Reads a whole file, or throws ConfigError naming it and what to do.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace mci::topo
