#include "launch/ranks/placement.hpp"

#include <fmt/format.h>

#include "common/cpus.hpp"
#include "common/log.hpp"
#include "launch/output/stream_relay.hpp"
#include "mci/errors.hpp"
#include "topo/binding.hpp"
#include "topo/cpu_sets.hpp"
#include "topo/live_import.hpp"

namespace mci::launch {

std::vector<std::vector<int>> place_ranks(const JobConfig& job, const Attempt& first) {
  std::vector<std::vector<int>> cpus(static_cast<std::size_t>(job.nproc_per_node));
  if (job.bind == topo::BindMode::none) return cpus;
  const char* mode = job.bind == topo::BindMode::numa ? "numa" : "core";
  try {
    const topo::Topology t = topo::read_live({});
    const std::vector<topo::RankCpus> plan = topo::plan_binding(t, job.bind, job.nproc_per_node, affinity_cpus());
    for (int local = 0; local < job.nproc_per_node; ++local) {
      const topo::RankCpus& p = plan[static_cast<std::size_t>(local)];
      cpus[static_cast<std::size_t>(local)] = p.cpus;
      say(fmt::format("mcirun: --bind {}: rank {} (local {}) on CPUs {} ({})", mode, first.rank_of(local), local,
                      p.cpus.empty() ? "unchanged" : topo::cpu_list_text(p.cpus), p.why));
    }
  } catch (const Error& e) {
    say(fmt::format("mcirun: --bind {}: cannot read this machine's topology ({}); the processes start unpinned", mode,
                    e.what()));
  }
  return cpus;
}

}  // namespace mci::launch
