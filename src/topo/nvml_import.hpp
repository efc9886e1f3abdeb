// GPUs, NVLinks, nvidia-smi's path levels and P2P status from NVML, opened
// with dlopen like NCCL does (no NVML headers or link-time dependency): a
// machine without the driver still runs mci-topo and is told why it sees no
// GPU. MCI_NVML_LIBRARY names another library (tests load a fake one).
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

// The library to open: `configured` if set, else $MCI_NVML_LIBRARY, else
// libnvidia-ml.so.1.
std::string nvml_library_path(const std::string& configured);

// Merges NVML's GPUs into `t` (matched to the PCI tree by bus id) with
// their NVLinks, levels and P2P status. Returns false and sets
// t.no_gpu_reason when NVML is missing, the driver is not loaded, or it
// sees no GPU: none of these is an error for mci-topo.
bool add_nvml(Topology& t, const std::string& library);

}  // namespace mci::topo
