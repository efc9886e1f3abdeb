// Collectives across several hosts: shared memory inside each host, TCP only
// between the hosts' leaders (the lowest rank of each host), so the network
// carries one host's worth of data instead of one rank's per rank.
#pragma once

#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/copy_kernels.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::coll {

struct HierCtx {
  transport::Transport& t;          // the whole group's TCP mesh
  transport::ShmWorld* local;       // this host's ranks; nullptr when alone on its host
  const std::vector<int>& leaders;  // the lowest rank of each host, ascending
  const CollectiveDesc& d;
  const Deadline& dl;
  Scratch& scratch;
  SharedCopier& copier;
};

// Reduce to the leader in shared memory, all-reduce between leaders over
// TCP, broadcast from the leader in shared memory.
void hierarchical_all_reduce(const HierCtx& c);

}  // namespace mci::coll
