// Where each local rank of a job should run (mcirun --bind): on the CPUs of
// its GPU's NUMA node, or on cores of its own, from the same model mci-topo
// prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topo/model.hpp"

namespace mci::topo {

enum class BindMode { none, numa, core };

// "none", "numa", "core"; nullopt for anything else.
std::optional<BindMode> parse_bind_mode(const std::string& text);

struct RankCpus {
  std::vector<int> cpus;  // empty: leave the rank where it is
  std::string why;        // "NUMA node 0 of GPU0", "cores 0-3 of NUMA node 1"
};

// One entry per local rank. numa: the CPUs of the NUMA node of GPU
// `local % gpus` (or NUMA nodes in turn when there is no GPU); core: that
// node's CPUs split into equal blocks among the ranks placed on it (all
// CPUs split among the ranks when there is no GPU). Only CPUs in `allowed`
// are handed out (mcirun's own affinity) unless none of a node's is.
std::vector<RankCpus> plan_binding(const Topology& t, BindMode mode, int local_ranks, const std::vector<int>& allowed);

}  // namespace mci::topo
