#include "topo/paths.hpp"

#include <algorithm>
#include <limits>

namespace mci::topo {

const char* nccl_path_name(NcclPath p) {
  switch (p) {
    case NcclPath::loc: return "LOC";
    case NcclPath::nvl: return "NVL";
    case NcclPath::nvb: return "NVB";
    case NcclPath::c2c: return "C2C";
    case NcclPath::pix: return "PIX";
    case NcclPath::pxb: return "PXB";
    case NcclPath::p2c: return "P2C";
    case NcclPath::pxn: return "PXN";
    case NcclPath::phb: return "PHB";
    case NcclPath::sys: return "SYS";
    case NcclPath::net: return "NET";
  }
  return "?";
}

const char* level_name(PciLevel l) {
  switch (l) {
    case PciLevel::self: return "X";
    case PciLevel::pix: return "PIX";
    case PciLevel::pxb: return "PXB";
    case PciLevel::phb: return "PHB";
    case PciLevel::node: return "NODE";
    case PciLevel::sys: return "SYS";
  }
  return "?";
}

namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

std::vector<int> chain_up(const Topology& t, int id) {
  std::vector<int> c;
  for (int n = id; n >= 0; n = t.at(n).parent) c.push_back(n);
  return c;
}

const Link* find_link(const Topology& t, int a, int b, LinkKind kind) {
  for (const Link& l : t.links) {
    if (l.kind == kind && ((l.a == a && l.b == b) || (l.a == b && l.b == a))) return &l;
  }
  return nullptr;
}

struct Bottleneck {
  double GBps = kUnlimited, nccl = kUnlimited;
  int hops = 0;
  void cross(const Link* l) {
    ++hops;
    if (!l) return;  // a link without a known rate (host bridge to its CPU)
    GBps = std::min(GBps, l->GBps);
    nccl = std::min(nccl, l->nccl_GBps);
  }
};

NcclPath nccl_of(PciLevel l) {
  switch (l) {
    case PciLevel::self: return NcclPath::loc;
    case PciLevel::pix: return NcclPath::pix;
    case PciLevel::pxb: return NcclPath::pxb;
    case PciLevel::phb:
    case PciLevel::node: return NcclPath::phb;
    case PciLevel::sys: return NcclPath::sys;
  }
  return NcclPath::sys;
}

// The PCI part: walk both chains up to their lowest common node (or to
// their CPUs, joined by the SMP link, when there is none).
void classify_pci(const Topology& t, Path& p) {
  const std::vector<int> ca = chain_up(t, p.from), cb = chain_up(t, p.to);
  std::size_t ia = ca.size() - 1, ib = cb.size() - 1;
  int common = -1;
  for (std::size_t i = 0; i < ca.size() && common < 0; ++i) {
    const auto it = std::find(cb.begin(), cb.end(), ca[i]);
    if (it == cb.end()) continue;
    common = ca[i];
    ia = i;
    ib = static_cast<std::size_t>(it - cb.begin());
  }
  Bottleneck bn;
  p.via.clear();
  for (std::size_t i = 0; i < ia; ++i) {
    bn.cross(find_link(t, ca[i], ca[i + 1], LinkKind::pci));
    p.via.push_back(ca[i + 1]);
  }
  if (common < 0) {
    bn.cross(find_link(t, ca[ia], cb[ib], LinkKind::smp));
    p.via.push_back(cb[ib]);
  }
  for (std::size_t i = ib; i > 0; --i) {
    bn.cross(find_link(t, cb[i], cb[i - 1], LinkKind::pci));
    if (i > 1) p.via.push_back(cb[i - 1]);
  }
  const auto switches =
      std::count_if(p.via.begin(), p.via.end(), [&](int n) { return t.at(n).kind == NodeKind::pci_switch; });
  if (common < 0) {
    p.level = PciLevel::sys;
  } else if (t.at(common).kind == NodeKind::host_bridge) {
    p.level = PciLevel::phb;
  } else if (t.at(common).kind == NodeKind::cpu) {
    p.level = PciLevel::node;
  } else {
    // Below one switch: one bridge crossed is PIX, more is PXB.
    p.level = switches <= 1 ? PciLevel::pix : PciLevel::pxb;
  }
  p.hops = bn.hops;
  p.GBps = bn.GBps == kUnlimited ? 0 : bn.GBps;
  p.nccl_GBps = bn.nccl == kUnlimited ? 0 : bn.nccl;
}

// NVLinks straight between two GPUs, or through one NVSwitch fabric.
bool classify_nvlink(const Topology& t, Path& p) {
  if (t.at(p.from).kind != NodeKind::gpu || t.at(p.to).kind != NodeKind::gpu) return false;
  if (const Link* l = find_link(t, p.from, p.to, LinkKind::nvlink)) {
    p.nvlinks = l->count;
    p.hops = 1;
    p.GBps = l->GBps;
    p.nccl_GBps = l->nccl_GBps;
    p.nccl = NcclPath::nvl;
    p.via.clear();
    return true;
  }
  for (const Node& s : t.nodes) {
    if (s.kind != NodeKind::nvswitch) continue;
    const Link* la = find_link(t, p.from, s.id, LinkKind::nvlink);
    const Link* lb = find_link(t, p.to, s.id, LinkKind::nvlink);
    if (!la || !lb) continue;
    p.nvlinks = std::min(la->count, lb->count);
    p.hops = 2;
    p.GBps = std::min(la->GBps, lb->GBps);
    p.nccl_GBps = std::min(la->nccl_GBps, lb->nccl_GBps);
    p.nccl = NcclPath::nvl;
    p.via = {s.id};
    return true;
  }
  // Through a third GPU's NVLinks: NCCL's NVB; nvidia-smi shows the PCI cell.
  for (int g : t.gpus()) {
    if (g == p.from || g == p.to) continue;
    const Link* la = find_link(t, p.from, g, LinkKind::nvlink);
    const Link* lb = find_link(t, g, p.to, LinkKind::nvlink);
    if (!la || !lb) continue;
    const double bw = std::min(la->GBps, lb->GBps);
    if (bw <= p.GBps) continue;
    p.hops = 2;
    p.GBps = bw;
    p.nccl_GBps = std::min(la->nccl_GBps, lb->nccl_GBps);
    p.nccl = NcclPath::nvb;
    p.via = {g};
    return false;
  }
  return false;
}

}  // namespace

Path classify(const Topology& t, int a, int b) {
  Path p;
  p.from = a;
  p.to = b;
  if (a == b) {
    p.smi = std::string(1, 'X');  // not = "X": g++ 12's false -Wrestrict at -O2+ (GCC bug 105329)
    return p;
  }
  classify_pci(t, p);
  const auto key = std::make_pair(std::min(a, b), std::max(a, b));
  if (const auto it = t.reported_levels.find(key); it != t.reported_levels.end()) p.level = it->second;
  p.nccl = nccl_of(p.level);
  const bool nv = classify_nvlink(t, p);
  p.smi = nv ? "NV" + std::to_string(p.nvlinks) : level_name(p.level);
  return p;
}

std::vector<Path> all_paths(const Topology& t) {
  std::vector<int> ends = t.gpus();
  for (int n : t.nics()) ends.push_back(n);
  std::vector<Path> out;
  for (int a : ends) {
    for (int b : ends) out.push_back(classify(t, a, b));
  }
  return out;
}

bool nccl_p2p_by_default(const Path& p) {
  return p.nccl == NcclPath::loc || p.nccl == NcclPath::nvl || p.nccl == NcclPath::nvb || p.nccl == NcclPath::pix ||
         p.nccl == NcclPath::pxb;
}

}  // namespace mci::topo
