#include "topo/nccl_xml.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "mci/errors.hpp"
#include "topo/cpu_sets.hpp"
#include "topo/link_rates.hpp"
#include "topo/xml.hpp"

namespace mci::topo {

namespace {

constexpr const char* kNvSwitchClass = "0x068000";

int to_int(const std::string& s, int fallback) {
  if (s.empty()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 0);
  return end == s.c_str() ? fallback : static_cast<int>(v);
}

struct PendingNvlink {
  int gpu;
  std::string target, tclass;
  int count;
};

class Importer {
 public:
  explicit Importer(std::string what) {
    t_.source = "nccl-xml " + what;
    what_ = std::move(what);
  }

  Topology run(const XmlElement& root) {
    if (root.name != "system") {
      throw ConfigError(
          fmt::format("{}: the root element is <{}>, NCCL's topology files start with <system>; "
                      "pass a file written through NCCL_TOPO_DUMP_FILE",
                      what_, root.name));
    }
    for (const XmlElement& e : root.children) {
      if (e.name == "cpu") cpu(e);
    }
    nvlinks();
    t_.finish();
    if (t_.gpus().empty()) t_.no_gpu_reason = fmt::format("{} lists no <gpu>", what_);
    return std::move(t_);
  }

 private:
  void cpu(const XmlElement& e) {
    Node n;
    n.kind = NodeKind::cpu;
    n.numa = to_int(e.attr("numaid"), -1);
    n.cpus = cpu_list_text(parse_cpu_mask(e.attr("affinity")));
    n.arch = e.attr("arch");
    n.vendor = e.attr("vendor");
    n.cpu_family = to_int(e.attr("familyid"), 0);
    n.cpu_model = to_int(e.attr("modelid"), 0);
    const int id = t_.add(n);
    for (const XmlElement& c : e.children) {
      if (c.name == "pci") pci(c, host_bridge(id, c.attr("busid")));
      if (c.name == "nic") nic(c, id);
    }
  }

  // NCCL's XML has no host bridges; devices whose top-level busids share
  // domain:bus sit behind one (a VM's flat bus 00 is one host bridge).
  int host_bridge(int cpu, const std::string& busid) {
    const std::string key = std::to_string(cpu) + "/" + normalize_busid(busid).substr(0, 7);
    if (const auto it = bridges_.find(key); it != bridges_.end()) return it->second;
    Node hb;
    hb.kind = NodeKind::host_bridge;
    hb.parent = cpu;
    return bridges_[key] = t_.add(hb);
  }

  void pci(const XmlElement& e, int parent) {
    Node n;
    n.parent = parent;
    n.busid = e.attr("busid");
    n.pci_class = e.attr("class");
    n.pci_vendor = e.attr("vendor");
    n.pci_device = e.attr("device");
    n.up.gts = parse_gts(e.attr("link_speed"));
    n.up.width = to_int(e.attr("link_width"), 0);
    const XmlElement* gpu = nullptr;
    const XmlElement* nic_el = nullptr;
    bool has_pci_children = false;
    for (const XmlElement& c : e.children) {
      if (c.name == "gpu") gpu = &c;
      if (c.name == "nic") nic_el = &c;
      if (c.name == "pci") has_pci_children = true;
    }
    if (gpu) {
      n.kind = NodeKind::gpu;
      n.index = to_int(gpu->attr("dev"), -1);
      n.sm = to_int(gpu->attr("sm"), 0);
      n.rank = to_int(gpu->attr("rank"), -1);
    } else if (nic_el && nic_el->children.size() == 1) {
      set_nic(n, nic_el->children.front());
    } else if (has_pci_children || n.pci_class.rfind("0x0604", 0) == 0) {
      n.kind = NodeKind::pci_switch;
    } else {
      n.kind = NodeKind::pci_device;
    }
    const int id = t_.add(n);
    if (n.up.width == 0 && n.up.gts > 0) hidden_width_.push_back(id);
    if (gpu) {
      for (const XmlElement& l : gpu->children) {
        if (l.name == "nvlink") {
          pending_.push_back({id, l.attr("target"), l.attr("tclass"), to_int(l.attr("count"), 1)});
        }
      }
    }
    if (nic_el && nic_el->children.size() != 1) nic(*nic_el, id);
    for (const XmlElement& c : e.children) {
      if (c.name == "pci") pci(c, id);
    }
  }

  static void set_nic(Node& n, const XmlElement& net) {
    n.kind = NodeKind::nic;
    n.label = net.attr("name");
    n.index = to_int(net.attr("dev"), -1);
    n.nic_gbps = to_int(net.attr("speed"), 0) / 1000.0;
  }

  // A <nic> without a PCI function of its own (a VM's virtio NIC, or the
  // ports of one multi-port card).
  void nic(const XmlElement& e, int parent) {
    for (const XmlElement& net : e.children) {
      if (net.name != "net") continue;
      Node n;
      n.parent = parent;
      set_nic(n, net);
      t_.add(n);
    }
  }

  void nvlinks() {
    std::map<std::pair<int, int>, int> counts;
    int fabric = -1;
    for (const PendingNvlink& p : pending_) {
      int other = -1;
      if (p.tclass == kNvSwitchClass) {
        // NCCL folds every NVSwitch into one fabric node; so does mci.
        if (fabric < 0) {
          Node s;
          s.kind = NodeKind::nvswitch;
          fabric = t_.add(s);
        }
        other = fabric;
        counts[{p.gpu, other}] += p.count;
        continue;
      }
      const auto target = t_.find_busid(p.target);
      if (!target || t_.at(*target).kind != NodeKind::gpu) {
        t_.notes.push_back(fmt::format("{}: an NVLink of {} leads to {} (class {}), which the file does not list",
                                       what_, t_.at(p.gpu).busid, p.target, p.tclass));
        continue;
      }
      other = *target;
      // Both ends list the same links: keep one entry per pair.
      const auto key = std::make_pair(std::min(p.gpu, other), std::max(p.gpu, other));
      counts[key] = std::max(counts[key], p.count);
    }
    for (const auto& [pair, count] : counts) {
      const int sm = t_.at(pair.first).sm;
      t_.add_link(Link{pair.first, pair.second, LinkKind::nvlink, count, count * nvlink_GBps(sm),
                       count * nvlink_nccl_GBps(sm)});
    }
    if (!hidden_width_.empty()) {
      std::vector<std::string> ids;
      for (int id : hidden_width_) ids.push_back(t_.at(id).busid);
      t_.notes.push_back(
          fmt::format("{}: link width 0 (hidden, as VMs do) for {}; x16 is assumed", what_, fmt::join(ids, ", ")));
    }
  }

  Topology t_;
  std::string what_;
  std::map<std::string, int> bridges_;
  std::vector<PendingNvlink> pending_;
  std::vector<int> hidden_width_;
};

using Attrs = std::vector<std::pair<std::string, std::string>>;

class Exporter {
 public:
  explicit Exporter(const Topology& t) : t_(t) {}

  std::string run() {
    w_.open("system", {{"version", "1"}});
    for (int c : t_.cpus()) cpu(t_.at(c));
    w_.close("system");
    return w_.text();
  }

 private:
  std::vector<int> children(int id) const {
    std::vector<int> out;
    for (const Node& n : t_.nodes) {
      if (n.parent == id) out.push_back(n.id);
    }
    return out;
  }

  void cpu(const Node& c) {
    const std::string mask = c.cpus.empty() ? "" : cpu_mask_text(parse_cpu_list(c.cpus));
    w_.open("cpu", {{"numaid", std::to_string(c.numa)},
                    {"affinity", mask},
                    {"arch", c.arch.empty() ? "x86_64" : c.arch},
                    {"vendor", c.vendor},
                    {"familyid", std::to_string(c.cpu_family)},
                    {"modelid", std::to_string(c.cpu_model)}});
    below(c.id);
    w_.close("cpu");
  }

  // Host bridges and plain devices without GPUs or NICs below are not
  // NCCL's business: their children move up.
  void below(int id) {
    for (int k : children(id)) {
      const Node& n = t_.at(k);
      if (n.kind == NodeKind::host_bridge) {
        below(k);
      } else if (n.kind == NodeKind::nic && n.busid.empty()) {
        w_.open("nic", {});
        net(n);
        w_.close("nic");
      } else if (n.kind != NodeKind::nvswitch && !n.busid.empty() && leads_somewhere(k)) {
        pci(n);
      }
    }
  }

  bool leads_somewhere(int id) const {
    const NodeKind k = t_.at(id).kind;
    if (k == NodeKind::gpu || k == NodeKind::nic) return true;
    for (int c : children(id)) {
      if (leads_somewhere(c)) return true;
    }
    return false;
  }

  Attrs pci_attrs(const Node& n) const {
    std::string cls = n.pci_class;
    if (cls.empty()) {
      cls = n.kind == NodeKind::gpu ? "0x030200" : n.kind == NodeKind::nic ? "0x020000" : "0x060400";
    }
    return {{"busid", n.busid},
            {"class", cls},
            {"vendor", n.pci_vendor.empty() ? "0xffff" : n.pci_vendor},
            {"device", n.pci_device.empty() ? "0xffff" : n.pci_device},
            {"subsystem_vendor", "0xffff"},
            {"subsystem_device", "0xffff"},
            {"link_speed", n.up.gts > 0 ? gts_text(n.up.gts) : ""},
            {"link_width", std::to_string(n.up.width)}};
  }

  void net(const Node& n) {
    w_.leaf("net", {{"name", n.label.empty() ? n.name : n.label},
                    {"dev", std::to_string(n.index)},
                    {"speed", std::to_string(static_cast<long>(n.nic_gbps * 1000))},
                    {"port", "1"},
                    {"latency", "0"},
                    {"guid", fmt::format("{:#x}", n.index + 1)},
                    {"maxconn", "131072"},
                    {"gdr", "1"}});
  }

  void pci(const Node& n) {
    w_.open("pci", pci_attrs(n));
    if (n.kind == NodeKind::gpu) {
      const std::vector<const Link*> nv = nvlinks_of(n.id);
      Attrs g{{"dev", std::to_string(n.index)},
              {"sm", std::to_string(n.sm)},
              {"rank", std::to_string(n.rank >= 0 ? n.rank : n.index)},
              {"gdr", "1"}};
      if (nv.empty()) {
        w_.leaf("gpu", g);
      } else {
        w_.open("gpu", g);
        for (const Link* l : nv) {
          const Node& other = t_.at(l->a == n.id ? l->b : l->a);
          const bool sw = other.kind == NodeKind::nvswitch;
          w_.leaf("nvlink", {{"target", sw ? fmt::format("fffffff:ffff:ff.{}", 0) : other.busid},
                             {"count", std::to_string(l->count)},
                             {"tclass", sw ? kNvSwitchClass : "0x030200"}});
        }
        w_.close("gpu");
      }
    } else if (n.kind == NodeKind::nic) {
      w_.open("nic", {});
      net(n);
      w_.close("nic");
    }
    below(n.id);
    w_.close("pci");
  }

  std::vector<const Link*> nvlinks_of(int id) const {
    std::vector<const Link*> out;
    for (const Link& l : t_.links) {
      if (l.kind == LinkKind::nvlink && (l.a == id || l.b == id)) out.push_back(&l);
    }
    return out;
  }

  const Topology& t_;
  XmlWriter w_;
};

}  // namespace

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("cannot read {} '{}': check the path and its permissions", what, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Topology read_nccl_xml(const std::string& text, const std::string& what) {
  return Importer(what).run(parse_xml(text, what));
}

Topology read_nccl_xml_file(const std::string& path) {
  return read_nccl_xml(read_text_file(path, "the NCCL topology file"), path);
}

std::string write_nccl_xml(const Topology& t) { return Exporter(t).run(); }

}  // namespace mci::topo
