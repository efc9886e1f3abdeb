#include "topo/perf_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "mci/errors.hpp"
#include "topo/advice.hpp"

namespace mci::topo {

namespace {

constexpr double kNvlinkGuide = 0.8;  // NCCL's rings reach about this on NVLink
constexpr double kPcieGuide = 0.6;    // and at least this on PCIe

double best_busbw(const nlohmann::json& j) {
  double best = j.value("peak_busbw_GBps", 0.0);
  for (const auto& row : j.value("results", nlohmann::json::array())) {
    for (const char* placement : {"out_of_place", "in_place"}) {
      if (row.contains(placement) && row[placement].is_object()) {
        best = std::max(best, row[placement].value("busbw_GBps", 0.0));
      }
    }
  }
  return best;
}

// The GPUs the ranks used, from mci-perf's "cuda:N" device names.
std::vector<int> used_gpus(const Topology& t, const nlohmann::json& devices, std::set<std::string>& hosts) {
  std::vector<int> out;
  for (const auto& d : devices) {
    hosts.insert(d.value("host", ""));
    const std::string dev = d.value("device", "");
    if (dev.rfind("cuda:", 0) != 0) continue;
    const int index = std::atoi(dev.c_str() + 5);
    for (int g : t.gpus()) {
      if (t.at(g).index == index && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
    }
  }
  return out;
}

}  // namespace

PerfCheck check_perf(const Topology& t, const std::string& json, const std::string& what,
                     std::optional<double> ceiling_GBps, const std::string& ceilings_program) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{} is not JSON ({}): pass the file mci-perf wrote with --json", what, e.what()));
  }
  if (!j.is_object() || j.value("tool", "") != "mci-perf") {
    throw ConfigError(
        fmt::format("{} was not written by mci-perf (no \"tool\": \"mci-perf\"): pass the file "
                    "mci-perf wrote with --json",
                    what));
  }
  PerfCheck c;
  c.collective = j.value("collective", "?");
  c.backend = j.value("backend", "?");
  c.ranks = j.value("ranks", 0);
  c.busbw_GBps = best_busbw(j);
  std::set<std::string> hosts;
  const std::vector<int> gpus = used_gpus(t, j.value("devices", nlohmann::json::array()), hosts);
  std::string s = fmt::format("{} on the {} backend, {} ranks: best busbw {:.2f} GB/s\n", c.collective, c.backend,
                              c.ranks, c.busbw_GBps);
  bool nvswitch = false;
  // mci-perf says whether the backend moved data over the devices' own
  // links (its row's gpu_per_rank); a file without the key: where the
  // buffers were.
  const bool device_links = j.value("device_links", !gpus.empty());
  if (!device_links || gpus.empty()) {
    if (ceiling_GBps) {
      c.line_GBps = *ceiling_GBps;
      c.ceiling_from = "the memory-copy ceiling given with --ceiling";
      c.guide = kPcieGuide;
    } else {
      s += fmt::format(
          "The ranks used host memory: their ceiling is the memory-copy rate, which mci-topo cannot "
          "know. Run\n{} --benchmark_filter=Memcpy and pass its GB/s with --ceiling.\n",
          ceilings_program);
    }
  } else if (gpus.size() < 2) {
    s += "One GPU: no link is crossed, so there is no line rate to compare with.\n";
  } else {
    const Ring r = ring_through(t, gpus);
    c.line_GBps = r.GBps;
    c.ceiling_from = fmt::format("the ring's slowest hop, {}", r.bottleneck);
    c.guide = r.over_nvlink ? kNvlinkGuide : kPcieGuide;
    for (const Node& n : t.nodes) nvswitch = nvswitch || n.kind == NodeKind::nvswitch;
  }
  if (hosts.size() > 1) {
    s += fmt::format(
        "The ranks ran on {} hosts: the network between them is likely the real ceiling, and this\n"
        "topology shows one host only.\n",
        hosts.size());
  }
  if (c.line_GBps > 0) {
    c.fraction = c.busbw_GBps / c.line_GBps;
    s += fmt::format("Line rate: {:.2f} GB/s per direction ({}).\n", c.line_GBps, c.ceiling_from);
    s += fmt::format("Reached {:.0f}% of it; a healthy run reaches about {:.0f}% here.\n", *c.fraction * 100,
                     c.guide * 100);
    if (*c.fraction < c.guide) {
      s += "Below the guide: check mci-topo's warnings (P2P disabled, a link below its speed, a VM), the rank\n"
           "binding (mcirun --bind numa), and that the sweep reached large messages (-e 1G).\n";
    } else if (*c.fraction > 1.0) {
      s += "Above the line rate: the algorithm moved fewer bytes than busbw assumes";
      s += nvswitch ? " (NVLS: NVSwitches reduce in the fabric)" : "";
      s += ", or the ranks shared memory.\n";
    }
  }
  if (nvswitch && c.collective == "all_reduce" && (!c.fraction || *c.fraction <= 1.0)) {
    s += "Note: with NVSwitches, NCCL's NVLS algorithm reduces inside the switch and its busbw can exceed the\n"
         "line rate.\n";
  }
  c.text = s;
  return c;
}

}  // namespace mci::topo
