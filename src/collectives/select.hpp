// The one place that chooses an algorithm: from the collective, its size, the
// world size and, when set, the user's forced choice (MCI_ALGO). A forced
// choice that does not apply to a collective falls back to the default.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/algo.hpp"
#include "common/fingerprint.hpp"

namespace mci::coll {

// Below this size all-reduce uses recursive doubling (latency), above it the
// ring (bandwidth).
inline constexpr std::size_t kSmallAllReduceBytes = 64 * 1024;
// In shared memory, at or below this size all-reduce and reduce let every
// rank reduce every buffer itself (one synchronisation); above it, rank r
// reduces slice r of each chunk and the others copy the result.
inline constexpr std::size_t kShmDirectBytes = 16 * 1024;

// Where the ranks are, as the transports found it.
enum class Layout : std::uint8_t {
  flat,          // TCP between every pair of ranks
  one_host,      // every rank on this host, sharing a segment
  hierarchical,  // several hosts, a segment on each host with several ranks
};

// one_host: a forced TCP algorithm (ring, recursive_doubling, tree) takes
// that collective off shared memory; a forced `direct` means shm_direct
// there. hierarchical: all-reduce goes through shared memory inside each host
// and TCP between host leaders unless a TCP algorithm is forced; the other
// collectives run over TCP.
Algo select_algo(OpKind kind, std::size_t bytes, int world, Algo forced, Layout layout = Layout::flat);

}  // namespace mci::coll
