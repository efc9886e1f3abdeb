#include "launch/attempt.hpp"

#include <utility>

#include "launch/config/job_config.hpp"

namespace mci::launch {

Attempt first_attempt(const JobConfig& job, JobStore store) {
  Attempt a;
  a.nnodes = job.nnodes;
  a.node_rank = job.node_rank;
  a.nproc_per_node = job.nproc_per_node;
  a.first_rank = job.rank_of(0);
  a.world = job.world_size();
  a.store = std::move(store);
  return a;
}

}  // namespace mci::launch
