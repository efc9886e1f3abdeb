// Line rates per direction, and the values NCCL's topology model assumes
// for the same links (src/graph/topo.h of NCCL): mci-topo reports both, so
// a user can compare a measurement with the wire and with NCCL's plan.
#pragma once

#include <string>

namespace mci::topo {

// PCIe payload rate per direction after line coding: Gen1/2 8b/10b, Gen3+
// 128b/130b. x16 Gen3/4/5 = 15.75/31.5/63 GB/s.
double pcie_GBps(double gts, int width);
// NCCL models a PCIe x16 link as 12/24/48 GB/s for Gen3/4/5 (scaled by width).
double pcie_nccl_GBps(double gts, int width);
// One NVLink, per direction: 25 GB/s for NVLink 2-4 (V100..H200), 50 for
// NVLink 5 (SM100); 20 for NVLink 1 (P100).
double nvlink_GBps(int sm);
// NCCL's per-link figures: 20.0 (SM60), 20.0 (SM70), 20.0 (SM80), 20.6 (SM90), 40.1 (SM100).
double nvlink_nccl_GBps(int sm);
// Between sockets: NCCL's figure for the CPU family (QPI/UPI/xGMI); mci has
// no better number, so it is both the line rate and the model.
double smp_GBps(const std::string& arch, const std::string& vendor, int family, int model);

// "32.0 GT/s PCIe", "16 GT/s", "8.0 GT/s" -> 32, 16, 8; 0 when unreadable.
double parse_gts(const std::string& text);
// The generation a per-lane rate belongs to (2.5 -> 1 ... 64 -> 6).
int pcie_generation(double gts);
std::string gts_text(double gts);  // 32 -> "32.0 GT/s PCIe" (NCCL's spelling)

}  // namespace mci::topo
