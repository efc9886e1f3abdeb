// Collectives across several hosts: shared memory inside each host, TCP only
// between one rank per host (its delegate), so the network carries one
// host's worth of data instead of one rank's per rank, and each host's ranks
// cross it once. The delegate is the host's leader (its lowest rank), except
// on the root's host for rooted collectives, where it is the root: the data
// then never makes an extra hop inside that host.
#pragma once

#include <vector>

#include "collectives/algorithm_rows.hpp"
#include "collectives/kernels/copy.hpp"
#include "collectives/mesh/algorithms.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::coll {

// Which rank is on which host; every rank holds the same map.
class HostMap {
 public:
  HostMap() = default;
  // Each host's ranks, ascending; hosts in the order of their lowest rank.
  explicit HostMap(std::vector<std::vector<int>> ranks_by_host);

  bool empty() const { return members_.empty(); }
  int hosts() const { return static_cast<int>(members_.size()); }
  const std::vector<int>& members(int host) const { return members_[static_cast<std::size_t>(host)]; }
  const std::vector<int>& leaders() const { return leaders_; }
  int host_of(int rank) const { return host_of_[static_cast<std::size_t>(rank)]; }
  // The rank's index among its host's ranks (its rank in the host's ShmWorld).
  int local_of(int rank) const { return local_of_[static_cast<std::size_t>(rank)]; }
  // One rank per host: `root` on its own host, the leader elsewhere.
  std::vector<int> delegates(int root) const;

 private:
  std::vector<std::vector<int>> members_;
  std::vector<int> leaders_;
  std::vector<int> host_of_;
  std::vector<int> local_of_;
};

struct HierCtx {
  transport::Transport& t;     // the whole group's mesh (TCP)
  transport::ShmWorld* local;  // this host's ranks; nullptr when alone on its host
  const HostMap& hosts;
  const CollectiveDesc& d;
  const Deadline& dl;
  Scratch& scratch;  // for the algorithms each phase runs
  Scratch& packed;   // for a host's blocks gathered in one place between phases
  SharedCopier& copier;
};

// The functions of the hierarchical rows (collectives/algorithm_rows.hpp),
// each in the file named for its collective:
// - all_reduce: reduce to the leader in shared memory, all-reduce between
//   leaders over TCP, broadcast from the leader in shared memory;
// - broadcast: between delegates (a tree rooted at the root), then inside
//   each host from its delegate;
// - reduce: inside each host to its delegate, then between delegates to the
//   root;
// - all_gather: each host's blocks at its leader, exchanged between leaders,
//   the whole result broadcast inside each host;
// - gather: each host's blocks at its delegate, sent to the root;
// - scatter: the root sends each host its blocks; each delegate scatters them;
// - reduce_scatter: each host's sum at its leader; each leader receives from
//   every other the partial sums of its host's blocks; each host's blocks
//   scattered from it;
// - all_to_all: each host's blocks at its leader; leaders exchange, for each
//   pair of hosts, the blocks one host's ranks send to the other's; each
//   rank's blocks scattered from its leader;
// - barrier: inside each host, between leaders, inside each host again.
#define MCI_DECLARE_HIER_ROW(algo, kind, function) void function(const HierCtx& c);
MCI_ALGORITHM_ROWS(MCI_ALGORITHM_ROW_ELSEWHERE, MCI_ALGORITHM_ROW_ELSEWHERE, MCI_DECLARE_HIER_ROW)
#undef MCI_DECLARE_HIER_ROW

}  // namespace mci::coll
