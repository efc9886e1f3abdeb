// Setting up shared memory for a group: which ranks share this host
// (hostname and boot id, as each rank publishes them in the store — not
// LOCAL_WORLD_SIZE, which says nothing about containers or namespaces), and
// one segment per host that the ranks of that host map: the whole group's
// when every rank is on one host, else the host's own, for hierarchical
// collectives (shared memory inside each host, TCP between host leaders).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "common/settings.hpp"
#include "mci/store.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::transport {

enum class ShmMode { automatic, required, off };

struct ShmSetup {
  // The ranks of this host that share a segment (nullptr: none, see `why`).
  std::unique_ptr<ShmWorld> world;
  // Group ranks in world order: world rank i is group rank members[i]. Also
  // set without a world (MCI_TRANSPORT=tcp): the ranks on this host.
  std::vector<int> members;
  // Every rank of the group is in `world`.
  bool one_host = false;
  // Several hosts, and every rank agreed on the layout: each host's ranks,
  // ascending, hosts in the order of their lowest rank (their leader).
  // Empty otherwise.
  std::vector<std::vector<int>> hosts;
  // Ranks of the group on this machine (hostname and boot id, whatever
  // MCI_HOST_ID says): what wait policies must count against the cores.
  int machine_ranks = 0;
  // The CPUs those ranks may run on together (the union of their affinity
  // masks: ranks pinned one core each still have a core each).
  int machine_cpus = 1;
  std::string why;  // why there is no world, or why not hierarchical
};

// Every rank of the group calls it; all get the same verdict on one_host and
// leaders. Throws ConfigError if shared memory was required (one host) and is
// not possible. Reads its own settings: MCI_SHM_BUFFER_BYTES,
// MCI_SHM_SPIN_US, MCI_SHM_YIELD_US and MCI_HOST_ID (which names this host
// for same-host detection instead of hostname and boot id, so tests can
// pretend several hosts on one machine).
ShmSetup connect_shm(Store& store, int rank, int size, ShmMode mode, const Settings& settings, const Deadline& dl);

}  // namespace mci::transport
