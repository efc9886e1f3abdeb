// The one place that chooses an algorithm: from the collective, its size, the
// world size, where the ranks are and, when set, the user's forced choice
// (MCI_ALGO). A forced algorithm applies to the collectives it has a row for
// in the algorithm table, where its place exists in this layout; the other
// collectives keep the default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/algo.hpp"
#include "common/op_kind.hpp"

namespace mci::coll {

// Below this size all-reduce uses recursive doubling (latency), above it the
// ring (bandwidth).
inline constexpr std::size_t kSmallAllReduceBytes = 64 * 1024;
// In shared memory, at or below this size all-reduce and reduce let every
// rank reduce every buffer itself (one synchronisation); above it, rank r
// reduces slice r of each chunk and the others copy the result.
inline constexpr std::size_t kShmDirectBytes = 16 * 1024;
// Across hosts, all-to-all blocks (one peer's share) up to this size go
// through each host's leader, in one message per pair of hosts; larger ones
// go straight between the ranks: every byte of an all-to-all is distinct,
// so the hierarchy saves messages, not bytes, and its unpipelined phases
// cost more than they save (2 hosts x 2 ranks over 2 Gbit/s links: 128 KiB
// blocks 2.2 ms against 2.4 flat, 1 MiB blocks 21.3 ms against 17.6).
inline constexpr std::size_t kHierAllToAllBlockBytes = 256 * 1024;

// Where the ranks are, as the transports found it.
enum class Layout : std::uint8_t {
  flat,          // a mesh (TCP) between every pair of ranks, no shared memory
  one_host,      // every rank on this host, sharing a segment (and the mesh)
  hierarchical,  // several hosts, a segment on each host with several ranks (and the mesh)
};

// reproducible (MCI_REPRODUCIBLE): all_reduce, reduce and reduce_scatter
// run only algorithms that reduce every element in rank order, the same
// fold on every layout and transport (rank_ordered()): the shm ones on one
// host, `direct` and `ordered` elsewhere; a forced algorithm that reduces in
// another order is passed over for them.
//
// Each place runs the kinds it has rows for (collectives/algorithm_rows.hpp):
// a kind the shared-memory or the hierarchical place lacks runs on the mesh
// there, and a kind no rule here names takes its place's first row. A kind
// with no row at all is a ConfigError naming it.
Algo select_algo(OpKind kind, std::size_t bytes, int world, std::optional<Algo> forced, Layout layout = Layout::flat,
                 bool reproducible = false);

// Whether `algo` reduces each element of `kind` in rank order (x0, then x1,
// ...: the same bits as every other such algorithm). True for a kind that
// reduces nothing.
bool rank_ordered(Algo algo, OpKind kind);

// Reduction in the shm segment of one host's ranks (all-reduce, reduce, and
// the phase inside each host of hierarchical all-reduce): shm_direct or
// shm_sliced by size.
Algo shm_reduce_algo(std::size_t bytes);

}  // namespace mci::coll
