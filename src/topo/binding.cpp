#include "topo/binding.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "topo/cpu_sets.hpp"

namespace mci::topo {

namespace {

std::vector<int> usable(const std::string& list, const std::vector<int>& allowed) {
  const std::vector<int> all = parse_cpu_list(list);
  std::vector<int> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [&](int c) { return allowed.empty() || std::find(allowed.begin(), allowed.end(), c) != allowed.end(); });
  return out.empty() ? all : out;
}

// Block `position` of `sharing` equal blocks of `set` (one CPU at least;
// more ranks than CPUs wrap around).
std::vector<int> share(const std::vector<int>& set, std::size_t position, std::size_t sharing) {
  if (set.empty()) return {};
  const std::size_t per = std::max<std::size_t>(1, set.size() / std::max<std::size_t>(1, sharing));
  const std::size_t first = (position * per) % set.size();
  return {set.begin() + static_cast<long>(first), set.begin() + static_cast<long>(std::min(set.size(), first + per))};
}

}  // namespace

std::optional<BindMode> parse_bind_mode(const std::string& text) {
  if (text == "none") return BindMode::none;
  if (text == "numa") return BindMode::numa;
  if (text == "core") return BindMode::core;
  return std::nullopt;
}

std::vector<RankCpus> plan_binding(const Topology& t, BindMode mode, int local_ranks, const std::vector<int>& allowed) {
  std::vector<RankCpus> plan(static_cast<std::size_t>(std::max(local_ranks, 0)));
  const std::vector<int> gpus = t.gpus(), cpus = t.cpus();
  if (mode == BindMode::none || cpus.empty()) return plan;
  // The cpu node of each rank, and why it was chosen.
  std::vector<int> node(plan.size());
  for (std::size_t r = 0; r < plan.size(); ++r) {
    if (gpus.empty()) {
      node[r] = cpus[r % cpus.size()];
      plan[r].why = "NUMA node " + numa_text(t.at(node[r]).numa) + ", no GPU";
    } else {
      const int g = gpus[r % gpus.size()];
      node[r] = t.cpu_of(g) >= 0 ? t.cpu_of(g) : cpus.front();
      plan[r].why = fmt::format("NUMA node {} of {}", numa_text(t.at(node[r]).numa), t.at(g).name);
    }
  }
  if (mode == BindMode::core && gpus.empty()) {
    // No GPU to follow: every CPU mcirun may use, split evenly.
    std::vector<int> all;
    for (int c : cpus) {
      for (int cpu : usable(t.at(c).cpus, allowed)) all.push_back(cpu);
    }
    for (std::size_t r = 0; r < plan.size(); ++r) {
      plan[r].cpus = share(all, r, plan.size());
      plan[r].why = "no GPU: the CPUs split evenly";
    }
    return plan;
  }
  for (std::size_t r = 0; r < plan.size(); ++r) {
    const std::vector<int> set = usable(t.at(node[r]).cpus, allowed);
    if (mode == BindMode::numa || set.empty()) {
      plan[r].cpus = set;
      continue;
    }
    // core: the ranks sharing this node split its CPUs in rank order.
    std::size_t sharing = 0, position = 0;
    for (std::size_t o = 0; o < plan.size(); ++o) {
      if (node[o] != node[r]) continue;
      if (o < r) ++position;
      ++sharing;
    }
    plan[r].cpus = share(set, position, sharing);
    plan[r].why = fmt::format("share {} of {}", position + 1, sharing) + " of " + plan[r].why;
  }
  return plan;
}

}  // namespace mci::topo
