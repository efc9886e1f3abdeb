// The model for people and programs: nvidia-smi's matrix and P2P table,
// the CPU/NUMA/NIC view of a machine without GPUs, JSON and Graphviz.
#pragma once

#include <string>

#include "topo/advice.hpp"
#include "topo/model.hpp"

namespace mci::topo {

// `nvidia-smi topo -m`: GPU and NIC rows and columns, CPU Affinity, NUMA
// Affinity, GPU NUMA ID, the Legend and NIC Legend. Without GPUs: the
// CPU/NUMA/NIC view and why no GPU was seen.
std::string matrix_text(const Topology& t);

// `nvidia-smi topo -p2p r|w|n|a|p`. Without NVML's answer a pair is OK when
// NCCL would use P2P there by default (NVLink, or PCIe up to PXB), U
// (unknown) otherwise.
std::string p2p_text(const Topology& t, char mode);

std::string json_text(const Topology& t, const Advice& a);

// Graphviz: `dot -Tsvg` turns it into the picture.
std::string dot_text(const Topology& t);

}  // namespace mci::topo
