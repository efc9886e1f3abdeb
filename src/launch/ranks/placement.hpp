// mcirun --bind: each local rank's CPUs, read from this machine once
// (mci-topo's model), each said on stderr so that a slow rank can be traced
// to its placement.
#pragma once

#include <vector>

#include "launch/attempt.hpp"
#include "launch/config/job_config.hpp"

namespace mci::launch {

// One list per local rank; all empty (inherited affinity) without --bind or
// when the machine cannot be read (said once).
std::vector<std::vector<int>> place_ranks(const JobConfig& job, const Attempt& first);

}  // namespace mci::launch
