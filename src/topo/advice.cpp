#include "topo/advice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "topo/link_rates.hpp"

namespace mci::topo {

namespace {

// Depth-first over the PCI tree, CPUs in order: neighbours in this order
// share the deepest switch, so a ring through it crosses each switch and
// each socket link once per direction.
std::vector<int> tree_order(const Topology& t) {
  std::vector<int> order;
  std::function<void(int)> visit = [&](int id) {
    if (t.at(id).kind == NodeKind::gpu) order.push_back(id);
    std::vector<int> kids;
    for (const Node& n : t.nodes) {
      if (n.parent == id) kids.push_back(n.id);
    }
    std::sort(kids.begin(), kids.end(), [&](int a, int b) { return t.at(a).busid < t.at(b).busid; });
    for (int k : kids) visit(k);
  };
  for (const Node& n : t.nodes) {
    if (n.parent < 0 && n.kind != NodeKind::nvswitch) visit(n.id);
  }
  return order;
}

void fit_advice(const Topology& t, const std::vector<Path>& gpu_pairs, Advice& a) {
  if (gpu_pairs.empty()) {
    a.fits.push_back({"ring", true,
                      "fewer than two GPUs: nothing to choose; for the cpu backend the shm transport's "
                      "algorithms apply (docs/performance.md)"});
    return;
  }
  double lo = -1, hi = 0;
  std::set<std::string> cells;
  for (const Path& p : gpu_pairs) {
    lo = lo < 0 ? p.GBps : std::min(lo, p.GBps);
    hi = std::max(hi, p.GBps);
    cells.insert(p.smi);
  }
  const bool uniform = hi > 0 && lo >= 0.99 * hi;
  const bool nvlink = std::all_of(gpu_pairs.begin(), gpu_pairs.end(), [](const Path& p) { return p.nvlinks > 0; });
  const bool sockets = std::any_of(gpu_pairs.begin(), gpu_pairs.end(),
                                   [](const Path& p) { return p.level == PciLevel::sys && p.nvlinks == 0; });
  const std::size_t n = t.gpus().size();
  if (uniform && nvlink) {
    a.fits.push_back({"all-to-all/direct", true,
                      fmt::format("every GPU pair has its own NVLink bandwidth ({}, {:.1f} GB/s per direction): each "
                                  "rank can talk to all others at once",
                                  fmt::join(cells, "/"), lo)});
  } else if (uniform) {
    a.fits.push_back({"all-to-all/direct", false,
                      fmt::format("every pair goes through PCIe ({}): direct exchanges all share the same uplinks "
                                  "and host bridge, {} flows on each",
                                  fmt::join(cells, "/"), n - 1)});
  } else {
    a.fits.push_back({"all-to-all/direct", false,
                      fmt::format("GPU pairs differ ({:.1f} to {:.1f} GB/s): direct exchanges share the slowest "
                                  "links, {} flows over each at once",
                                  lo, hi, n / 2 * (n - n / 2))});
  }
  a.fits.push_back({"ring", true,
                    fmt::format("the ring below crosses each switch and socket link once per direction; large "
                                "messages reach its bottleneck, {:.1f} GB/s",
                                a.ring.GBps)});
  a.fits.push_back({"tree", sockets,
                    sockets ? "GPUs sit on different sockets: a tree crosses the SMP link once per step and halves "
                              "the latency for small messages (NCCL picks tree across nodes)"
                            : "one socket: a tree only shortens latency for small messages; ring or direct moves "
                              "large ones faster"});
}

// One line per NUMA node: the GPUs whose ranks belong on its CPUs.
void binding_advice(const Topology& t, Advice& a) {
  for (int g : t.gpus()) {
    const int c = t.cpu_of(g);
    if (c < 0) continue;
    const auto same = std::find_if(a.bindings.begin(), a.bindings.end(), [&](const Binding& b) { return b.cpu == c; });
    if (same != a.bindings.end()) {
      same->gpus.push_back(g);
    } else {
      a.bindings.push_back({{g}, c, t.at(c).numa, t.at(c).cpus});
    }
  }
}

void warnings(const Topology& t, const std::vector<Path>& gpu_pairs, Advice& a) {
  std::vector<std::string> no_p2p;
  std::set<std::string> cells;
  for (const Path& p : gpu_pairs) {
    if (p.from < p.to && !nccl_p2p_by_default(p)) {
      no_p2p.push_back(fmt::format("{}-{}", t.at(p.from).name, t.at(p.to).name));
      cells.insert(p.smi);
    }
  }
  if (!no_p2p.empty()) {
    const std::size_t shown = std::min<std::size_t>(no_p2p.size(), 4);
    a.warnings.push_back(fmt::format(
        "NCCL disables peer-to-peer by default beyond PXB, so {} GPU pair{} ({}: {}{}) copy through host memory; "
        "NCCL_P2P_LEVEL=SYS enables it where the platform allows (test first: ACS or the IOMMU can make it hang or "
        "corrupt data)",
        no_p2p.size(), no_p2p.size() > 1 ? "s" : "", fmt::join(cells, "/"),
        fmt::join(no_p2p.begin(), no_p2p.begin() + static_cast<long>(shown), ", "),
        shown < no_p2p.size() ? ", ..." : ""));
  }
  std::istringstream words(t.kernel_cmdline);
  for (std::string word; words >> word;) {
    const bool iommu =
        word.rfind("iommu=", 0) == 0 || word.rfind("intel_iommu=", 0) == 0 || word.rfind("amd_iommu=", 0) == 0;
    // Passthrough and off leave peer traffic alone.
    if (!iommu || word.find("pt") != std::string::npos || word.find("off") != std::string::npos) continue;
    a.warnings.push_back(fmt::format(
        "the kernel command line has '{}': with the IOMMU translating (and PCIe ACS redirecting peer traffic to the "
        "root complex) P2P between GPUs slows down or hangs; use iommu=pt or disable ACS on the switches, then "
        "rerun mci-topo -p2p r",
        word));
  }
  const std::vector<int> gpus = t.gpus();
  const std::vector<int> cpus = t.cpus();
  const bool numa_hidden = t.numa_hidden || (!cpus.empty() && std::all_of(cpus.begin(), cpus.end(),
                                                                          [&](int c) { return t.at(c).numa < 0; }));
  const bool flat = gpus.size() > 1 && std::all_of(gpus.begin(), gpus.end(), [&](int g) {
                      const int p = t.at(g).parent;
                      return p >= 0 && t.at(p).kind == NodeKind::host_bridge;
                    });
  if (numa_hidden || flat || t.hypervisor) {
    std::vector<std::string> signs;
    if (t.hypervisor) signs.push_back("the CPU reports a hypervisor");
    if (numa_hidden) signs.push_back("NUMA ids are hidden (-1)");
    if (flat) signs.push_back("every GPU sits directly on a host bridge, no PCIe switch");
    a.warnings.push_back(fmt::format(
        "this looks like a VM ({}): the real switches and sockets are hidden, so paths and bandwidths here are the "
        "guest's view; busbw well below these figures points at the host's wiring (ask for P2P/NVLink passthrough)",
        fmt::join(signs, "; ")));
  }
  for (const Node& n : t.nodes) {
    if (n.up.max_gts > 0 && n.up.gts > 0 &&
        (n.up.gts < n.up.max_gts || (n.up.max_width > 0 && n.up.width < n.up.max_width))) {
      a.warnings.push_back(fmt::format(
          "{} ({}) runs its link at {} x{}, below its maximum {} x{} ({:.1f} of {:.1f} GB/s): reseat the card or check "
          "the slot and BIOS settings (an idle GPU may also lower its link speed to save power: check again under "
          "load)",
          n.name, n.busid, gts_text(n.up.gts), n.up.width, gts_text(n.up.max_gts), n.up.max_width,
          pcie_GBps(n.up.gts, n.up.width), pcie_GBps(n.up.max_gts, n.up.max_width)));
    }
  }
}

}  // namespace

Ring ring_through(const Topology& t, const std::vector<int>& gpus) {
  Ring r;
  for (int g : tree_order(t)) {
    if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) r.order.push_back(g);
  }
  if (r.order.size() < 2) return r;
  r.GBps = -1;
  r.over_nvlink = true;
  for (std::size_t i = 0; i < r.order.size(); ++i) {
    const Path p = classify(t, r.order[i], r.order[(i + 1) % r.order.size()]);
    if (p.nvlinks == 0) r.over_nvlink = false;
    if (r.GBps < 0 || p.GBps < r.GBps) {
      r.GBps = p.GBps;
      r.bottleneck = fmt::format("{} -> {} ({})", t.at(p.from).name, t.at(p.to).name, p.smi);
    }
  }
  return r;
}

Advice advise(const Topology& t) {
  Advice a;
  std::vector<Path> gpu_pairs;
  for (int x : t.gpus()) {
    for (int y : t.gpus()) {
      if (x != y) gpu_pairs.push_back(classify(t, x, y));
    }
  }
  a.ring = ring_through(t, t.gpus());
  fit_advice(t, gpu_pairs, a);
  binding_advice(t, a);
  warnings(t, gpu_pairs, a);
  return a;
}

std::string advice_text(const Topology& t, const Advice& a) {
  std::string s = "Advice:\n";
  if (a.ring.order.size() >= 2) {
    std::vector<std::string> names;
    for (int g : a.ring.order) names.push_back(t.at(g).name);
    s += fmt::format("  Ring order: {} (bottleneck {:.1f} GB/s per direction at {})\n", fmt::join(names, " "),
                     a.ring.GBps, a.ring.bottleneck);
  }
  for (const AlgorithmFit& f : a.fits) {
    s += fmt::format("  {:<18} {}: {}\n", f.algorithm, f.fits ? "fits" : "does not fit", f.why);
  }
  for (const Binding& b : a.bindings) {
    std::vector<std::string> names;
    for (int g : b.gpus) names.push_back(t.at(g).name);
    s += fmt::format("  Bind the ranks of {} to CPUs {} (NUMA node {})\n", fmt::join(names, " "),
                     b.cpus.empty() ? "N/A" : b.cpus, numa_text(b.numa));
  }
  for (const std::string& w : a.warnings) s += "  Warning: " + w + "\n";
  return s;
}

}  // namespace mci::topo
