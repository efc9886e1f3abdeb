// What lies between two devices: nvidia-smi's cell (X, NV#, PIX, PXB, PHB,
// NODE, SYS), NCCL's path type (LOC, NVL, NVB, PIX, PXB, PHB, SYS; NCCL has
// no NODE and counts it as PHB), the hops, and the narrowest link on the way.
#pragma once

#include <string>
#include <vector>

#include "topo/model.hpp"

namespace mci::topo {

enum class NcclPath { loc, nvl, nvb, c2c, pix, pxb, p2c, pxn, phb, sys, net };
const char* nccl_path_name(NcclPath p);
const char* level_name(PciLevel l);  // "PIX", "NODE", ...

struct Path {
  int from = -1, to = -1;
  std::string smi;                  // nvidia-smi's cell: "X", "NV18", "PIX", ...
  PciLevel level = PciLevel::self;  // the PCI part, even when NVLink is used
  int nvlinks = 0;                  // bonded NVLinks used, 0 when the path is PCI
  NcclPath nccl = NcclPath::loc;
  int hops = 0;          // links crossed
  double GBps = 0;       // bottleneck line rate per direction (0 for self)
  double nccl_GBps = 0;  // the same bottleneck in NCCL's model
  std::vector<int> via;  // the nodes crossed, from first to last
};

Path classify(const Topology& t, int a, int b);

// Every ordered pair among GPUs and NICs (GPUs first), self pairs included.
std::vector<Path> all_paths(const Topology& t);

// NCCL uses peer-to-peer copies up to PXB by default (NCCL_P2P_LEVEL).
bool nccl_p2p_by_default(const Path& p);

}  // namespace mci::topo
