// Forming a group once the job's store is reached: what init_process_group
// does after it found its coordinates, and what shrink() does again for the
// survivors of a group, over the same store and with the same options.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "mci/init.hpp"
#include "mci/store.hpp"

namespace mci {

// Where a group comes from: every group made from it (the first, then each
// shrink's) keeps it, so the store this rank may host outlives them all.
struct GroupOrigin {
  InitOptions opts;                     // backend, timeout, name, device, settings, token
  std::shared_ptr<Store> base;          // the job's store, without a prefix
  std::shared_ptr<StoreServer> hosted;  // the server this rank hosts (rank 0 without a launcher), or null
  std::string listen_host;              // where peers reach this rank
  std::string lineage;                  // the first group's root: LINEAGE/current names the group now
};

struct Place {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
};

// Meets the group's other ranks under `root` (a store prefix unique to this
// group: its generations count there) and connects the backend.
std::shared_ptr<ProcessGroup> join_group(const GroupOrigin& origin, const std::string& root, const Place& place);

// The ranks of the group whose store is `group` that the store certified
// gone (their connection ended: the certificate join_group registers).
std::set<int> certified_gone(Store& group);

// Writes, on behalf of `place_rank` (its rank in the group formed under
// `root`), the death certificates its own process registers in join_group:
// for a member known dead before it got there (shrink.cpp: a kept rank that
// died after the decision), so that the others' agreements stop at once
// rather than at their timeout. Only for the first generation under `root`.
void certify_lost_member(Store& base, const std::string& root, int place_rank);

// A replacement: waits until the running group's members grow it with this
// process (group/grow.cpp).
std::shared_ptr<ProcessGroup> wait_to_join(const GroupOrigin& origin, int local_rank);

}  // namespace mci
