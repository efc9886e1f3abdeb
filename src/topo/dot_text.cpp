#include <fmt/format.h>

#include "topo/link_rates.hpp"
#include "topo/render.hpp"

namespace mci::topo {

namespace {

std::string shape(NodeKind k) {
  switch (k) {
    case NodeKind::cpu: return "shape=box3d, style=filled, fillcolor=\"#dde8f5\"";
    case NodeKind::host_bridge: return "shape=box, style=rounded";
    case NodeKind::pci_switch: return "shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\"";
    case NodeKind::gpu: return "shape=box, style=filled, fillcolor=\"#c7e9c0\"";
    case NodeKind::nvswitch: return "shape=hexagon, style=filled, fillcolor=\"#fdd0a2\"";
    case NodeKind::nic: return "shape=box, style=filled, fillcolor=\"#fff3b0\"";
    case NodeKind::pci_device: return "shape=box, style=dashed";
  }
  return "shape=box";
}

std::string label(const Node& n) {
  std::string s = n.name;
  if (n.kind == NodeKind::cpu) {
    s += fmt::format("\\nNUMA {}", numa_text(n.numa));
    if (!n.cpus.empty()) s += "\\nCPUs " + n.cpus;
  }
  if (!n.label.empty()) s += "\\n" + n.label;
  if (!n.busid.empty()) s += "\\n" + n.busid;
  return s;
}

std::string edge_label(const Topology& t, const Link& l) {
  switch (l.kind) {
    case LinkKind::pci: {
      const Node& n = t.at(l.a);
      return fmt::format("PCIe Gen{} x{}\\n{:.1f} GB/s", pcie_generation(n.up.gts), n.up.width, l.GBps);
    }
    case LinkKind::nvlink: return fmt::format("NV{}\\n{:.0f} GB/s", l.count, l.GBps);
    case LinkKind::smp: return fmt::format("SMP\\n{:.0f} GB/s", l.GBps);
  }
  return "";
}

}  // namespace

std::string dot_text(const Topology& t) {
  std::string s = "// mci-topo: dot -Tsvg this.dot -o topology.svg\n";
  s += "graph topology {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
       "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const Node& n : t.nodes) {
    if (n.kind == NodeKind::pci_device) continue;  // neither GPU nor NIC: noise in a picture
    s += fmt::format("  {} [label=\"{}\", {}];\n", n.name, label(n), shape(n.kind));
  }
  for (const Node& n : t.nodes) {
    if (n.parent < 0 || n.kind == NodeKind::pci_device || t.uplink(n.id)) continue;
    s += fmt::format("  {} -- {};\n", t.at(n.parent).name, n.name);
  }
  for (const Link& l : t.links) {
    if (t.at(l.a).kind == NodeKind::pci_device || t.at(l.b).kind == NodeKind::pci_device) continue;
    const char* style = l.kind == LinkKind::nvlink ? ", color=\"#238b45\", penwidth=2"
                        : l.kind == LinkKind::smp  ? ", style=bold, color=\"#08519c\""
                                                   : "";
    s += fmt::format("  {} -- {} [label=\"{}\"{}];\n", t.at(l.b).name, t.at(l.a).name, edge_label(t, l), style);
  }
  s += "}\n";
  return s;
}

}  // namespace mci::topo
