#include "topo/pci_tree.hpp"

#include <fmt/format.h>

namespace mci::topo {

namespace {
constexpr unsigned kNvidia = 0x10de;
}

Node& PciTreeBuilder::node(NodeKind kind, int parent) {
  Node n;
  n.kind = kind;
  n.parent = parent;
  return t_.at(t_.add(n));
}

int PciTreeBuilder::cpu(int numa, const std::string& cpus) {
  Node& n = node(NodeKind::cpu, -1);
  n.numa = numa;
  n.cpus = cpus;
  return n.id;
}

int PciTreeBuilder::host_bridge(int cpu, const std::string& name) {
  Node& n = node(NodeKind::host_bridge, cpu);
  n.label = name;
  return n.id;
}

int PciTreeBuilder::function(int parent, const PciFunction& f) {
  const unsigned base = f.class_id >> 8;
  const bool bridge = f.class_id == 0x0604;
  const Node& up = t_.at(parent);
  if (bridge && up.kind == NodeKind::pci_switch && up.pci_vendor == fmt::format("{:#06x}", f.vendor) &&
      t_.at(up.parent).kind != NodeKind::host_bridge) {
    return parent;
  }
  Node n;
  n.parent = parent;
  n.busid = f.busid;
  n.pci_class = fmt::format("{:#06x}00", f.class_id);
  n.pci_vendor = fmt::format("{:#06x}", f.vendor);
  n.pci_device = fmt::format("{:#06x}", f.device);
  n.up = f.link;
  if (bridge) {
    n.kind = NodeKind::pci_switch;
  } else if (base == 0x03 && f.vendor == kNvidia) {
    n.kind = NodeKind::gpu;
  } else if (base == 0x02) {
    n.kind = NodeKind::nic;
    n.label = f.net_name;
  } else {
    n.kind = NodeKind::pci_device;
  }
  const int id = t_.add(n);
  if (f.link.gts <= 0 && f.GBps > 0) {
    // hwloc's rate is speed x width after coding, the same figure as ours;
    // NCCL's model keeps 48 of PCIe Gen5's 63 GB/s.
    t_.add_link(Link{id, parent, LinkKind::pci, 1, f.GBps, f.GBps * 48.0 / 63.0});
  }
  return id;
}

}  // namespace mci::topo
