#include "topo/sysfs_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "topo/cpu_sets.hpp"
#include "topo/link_rates.hpp"
#include "topo/pci_tree.hpp"

namespace mci::topo {

namespace fs = std::filesystem;

namespace {

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

unsigned hex(const fs::path& p) { return static_cast<unsigned>(std::strtoul(first_line(p).c_str(), nullptr, 16)); }

int number(const fs::path& p, int fallback) {
  const std::string s = first_line(p);
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return end == s.c_str() ? fallback : static_cast<int>(v);
}

bool is_busid(const std::string& name) {
  static const std::regex re("[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]");
  return std::regex_match(name, re);
}

std::vector<fs::path> sorted_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The interface or HCA of a NIC: in the function's folder, or one level
// down for virtio (0000:00:03.0/virtio0/net/eth0).
std::string net_name(const fs::path& dev, int depth = 0) {
  for (const char* sub : {"infiniband", "net"}) {
    const std::vector<fs::path> names = sorted_dirs(dev / sub);
    if (!names.empty()) return names.front().filename().string();
  }
  if (depth > 0) return "";
  for (const fs::path& d : sorted_dirs(dev)) {
    if (d.filename().string().rfind("virtio", 0) != 0) continue;
    if (std::string n = net_name(d, depth + 1); !n.empty()) return n;
  }
  return "";
}

PciLink link_of(const fs::path& dev) {
  PciLink l;
  l.gts = parse_gts(first_line(dev / "current_link_speed"));
  l.width = number(dev / "current_link_width", 0);
  l.max_gts = parse_gts(first_line(dev / "max_link_speed"));
  l.max_width = number(dev / "max_link_width", 0);
  return l;
}

// Every PCI function below `dir`, by bus id: the folders nest as the tree does.
void find_functions(const fs::path& dir, std::map<std::string, fs::path>& out) {
  for (const fs::path& d : sorted_dirs(dir)) {
    const std::string name = d.filename().string();
    if (!is_busid(name)) continue;
    out[normalize_busid(name)] = d;
    find_functions(d, out);
  }
}

class Reader {
 public:
  Reader(const fs::path& root, Topology& t) : root_(root), build_(t) {}

  void run() {
    for (const fs::path& node : sorted_dirs(root_ / "devices/system/node")) {
      const std::string name = node.filename().string();
      if (name.rfind("node", 0) != 0) continue;
      const int numa = std::atoi(name.c_str() + 4);
      cpus_.push_back({numa, build_.cpu(numa, first_line(node / "cpulist"))});
    }
    std::sort(cpus_.begin(), cpus_.end());
    if (cpus_.empty()) {
      // No NUMA information at all: one node, its id unknown.
      const std::string online = first_line(root_ / "devices/system/cpu/online");
      cpus_.push_back({-1, build_.cpu(-1, cpu_list_text(parse_cpu_list(online)))});
    }
    for (const fs::path& hb : sorted_dirs(root_ / "devices")) {
      const std::string name = hb.filename().string();
      if (name.rfind("pci", 0) != 0) continue;
      const int cpu = cpu_below(hb);
      const int id = build_.host_bridge(cpu, name);
      functions(hb, id);
    }
  }

 private:
  // A host bridge belongs to the NUMA node its first device names; a
  // hidden one (-1, VMs) goes with the first node.
  int cpu_below(const fs::path& dir) const {
    for (const fs::path& d : sorted_dirs(dir)) {
      if (!is_busid(d.filename().string())) continue;
      const int numa = number(d / "numa_node", -1);
      for (const auto& [n, id] : cpus_) {
        if (n == numa) return id;
      }
    }
    return cpus_.front().second;
  }

  void functions(const fs::path& dir, int parent) {
    for (const fs::path& d : sorted_dirs(dir)) {
      const std::string name = d.filename().string();
      if (!is_busid(name)) continue;
      PciFunction f;
      f.busid = name;
      f.class_id = hex(d / "class") >> 8;
      f.vendor = hex(d / "vendor");
      f.device = hex(d / "device");
      f.link = link_of(d);
      f.net_name = net_name(d);
      functions(d, build_.function(parent, f));
    }
  }

  fs::path root_;
  PciTreeBuilder build_;
  std::vector<std::pair<int, int>> cpus_;  // NUMA id, node id
};

}  // namespace

Topology read_sysfs(const std::string& root) {
  Topology t;
  t.source = root == "/sys" ? "live (sysfs)" : "sysfs " + root;
  Reader(root, t).run();
  add_sysfs_link_facts(t, root);
  return t;
}

void add_sysfs_link_facts(Topology& t, const std::string& root) {
  std::map<std::string, fs::path> functions;
  for (const fs::path& hb : sorted_dirs(fs::path(root) / "devices")) {
    if (hb.filename().string().rfind("pci", 0) == 0) find_functions(hb, functions);
  }
  std::vector<std::string> hidden;
  for (Node& n : t.nodes) {
    const auto found = functions.find(n.busid);
    if (n.busid.empty() || found == functions.end()) continue;
    const fs::path& dev = found->second;
    const PciLink l = link_of(dev);
    if (l.gts > 0) n.up = l;
    if (number(dev / "numa_node", -1) < 0 && (n.kind == NodeKind::gpu || n.kind == NodeKind::nic)) {
      hidden.push_back(n.busid);
    }
  }
  // hwloc gave rates only; sysfs's speed and width now make the links.
  t.links.erase(std::remove_if(t.links.begin(), t.links.end(),
                               [&](const Link& l) { return l.kind == LinkKind::pci && t.at(l.a).up.gts > 0; }),
                t.links.end());
  if (!hidden.empty()) {
    t.numa_hidden = true;
    t.notes.push_back(
        fmt::format("NUMA node -1 (hidden) for {}: shown on the first NUMA node", fmt::join(hidden, ", ")));
  }
}

void add_host_facts(Topology& t, const std::string& proc_root) {
  t.kernel_cmdline = first_line(fs::path(proc_root) / "cmdline");
  // The first processor's entry says what the sockets are (for the SMP
  // link's rate) and whether a hypervisor runs below.
  std::string vendor;
  int family = 0, model = 0;
  std::ifstream cpuinfo(fs::path(proc_root) / "cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (line.empty() && !vendor.empty()) break;
      continue;
    }
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") vendor = value;
    if (key == "cpu family") family = std::atoi(value.c_str());
    if (key == "model") model = std::atoi(value.c_str());
    if (key == "flags") t.hypervisor = (" " + value + " ").find(" hypervisor ") != std::string::npos;
  }
  for (Node& n : t.nodes) {
    if (n.kind != NodeKind::cpu || !n.vendor.empty()) continue;
    n.vendor = vendor;
    n.cpu_family = family;
    n.cpu_model = model;
  }
}

}  // namespace mci::topo
