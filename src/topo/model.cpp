#include "topo/model.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "topo/link_rates.hpp"

namespace mci::topo {

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::cpu: return "cpu";
    case NodeKind::host_bridge: return "host_bridge";
    case NodeKind::pci_switch: return "pci_switch";
    case NodeKind::pci_device: return "pci_device";
    case NodeKind::gpu: return "gpu";
    case NodeKind::nvswitch: return "nvswitch";
    case NodeKind::nic: return "nic";
  }
  return "?";
}

const char* link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::pci: return "pci";
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::smp: return "smp";
  }
  return "?";
}

std::string normalize_busid(const std::string& busid) {
  std::string s;
  for (char c : busid) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // NVML writes 8 domain digits (00000000:17:00.0); sysfs and NCCL write 4.
  const auto colon = s.find(':');
  if (colon != std::string::npos && colon > 4 && s.find(':', colon + 1) != std::string::npos) {
    s = s.substr(colon - 4);
  }
  if (s.find(':') == 2) s = "0000:" + s;  // "17:00.0"
  return s;
}

std::string numa_text(int numa) { return numa < 0 ? std::string("N/A") : std::to_string(numa); }

int Topology::add(Node n) {
  n.id = static_cast<int>(nodes.size());
  n.busid = normalize_busid(n.busid);
  nodes.push_back(std::move(n));
  return nodes.back().id;
}

void Topology::add_link(Link l) { links.push_back(l); }

std::vector<int> Topology::of_kind(NodeKind k) const {
  std::vector<int> ids;
  for (const Node& n : nodes) {
    if (n.kind == k) ids.push_back(n.id);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return at(a).index < at(b).index; });
  return ids;
}

std::optional<int> Topology::find_busid(const std::string& busid) const {
  const std::string want = normalize_busid(busid);
  for (const Node& n : nodes) {
    if (!n.busid.empty() && n.busid == want) return n.id;
  }
  return std::nullopt;
}

const Link* Topology::uplink(int id) const {
  const int p = at(id).parent;
  if (p < 0) return nullptr;
  for (const Link& l : links) {
    if (l.kind == LinkKind::pci && ((l.a == id && l.b == p) || (l.a == p && l.b == id))) return &l;
  }
  return nullptr;
}

int Topology::cpu_of(int id) const {
  for (int n = id; n >= 0; n = at(n).parent) {
    if (at(n).kind == NodeKind::cpu) return n;
  }
  return -1;
}

void Topology::finish() {
  // GPUs and NICs keep the index their source gave them; the rest are
  // numbered in the order they were found.
  std::map<NodeKind, int> counters;
  for (Node& n : nodes) {
    if (n.kind == NodeKind::gpu || n.kind == NodeKind::nic) {
      if (n.index < 0) n.index = counters[n.kind];
      counters[n.kind] = std::max(counters[n.kind], n.index + 1);
    }
  }
  std::map<NodeKind, int> others;
  for (Node& n : nodes) {
    if (!n.name.empty()) continue;
    switch (n.kind) {
      case NodeKind::gpu: n.name = "GPU" + std::to_string(n.index); break;
      case NodeKind::nic: n.name = "NIC" + std::to_string(n.index); break;
      case NodeKind::cpu: n.name = "CPU" + std::to_string(others[n.kind]++); break;
      case NodeKind::host_bridge: n.name = "HB" + std::to_string(others[n.kind]++); break;
      case NodeKind::pci_switch: n.name = "SW" + std::to_string(others[n.kind]++); break;
      case NodeKind::nvswitch: n.name = "NVS" + std::to_string(others[n.kind]++); break;
      case NodeKind::pci_device: n.name = "PCI" + std::to_string(others[n.kind]++); break;
    }
  }
  // A PCI node's uplink carries its own link rate; a host bridge's link to
  // its CPU is internal to the socket and never the bottleneck, so it gets
  // no link (and no rate) at all.
  for (const Node& n : nodes) {
    if (n.parent < 0 || n.kind == NodeKind::host_bridge || uplink(n.id)) continue;
    if (n.up.gts <= 0) continue;
    Link l;
    l.a = n.id;
    l.b = n.parent;
    l.kind = LinkKind::pci;
    l.GBps = pcie_GBps(n.up.gts, n.up.width);
    l.nccl_GBps = pcie_nccl_GBps(n.up.gts, n.up.width);
    links.push_back(l);
  }
  // Sockets talk over one SMP link each pair.
  const std::vector<int> cpu_ids = cpus();
  for (std::size_t i = 0; i < cpu_ids.size(); ++i) {
    for (std::size_t j = i + 1; j < cpu_ids.size(); ++j) {
      const bool exists = std::any_of(links.begin(), links.end(), [&](const Link& l) {
        return l.kind == LinkKind::smp &&
               ((l.a == cpu_ids[i] && l.b == cpu_ids[j]) || (l.a == cpu_ids[j] && l.b == cpu_ids[i]));
      });
      if (exists) continue;
      const Node& c = at(cpu_ids[i]);
      const double bw = smp_GBps(c.arch, c.vendor, c.cpu_family, c.cpu_model);
      links.push_back(Link{cpu_ids[i], cpu_ids[j], LinkKind::smp, 1, bw, bw});
    }
  }
}

}  // namespace mci::topo
