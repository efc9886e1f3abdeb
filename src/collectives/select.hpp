// The one place that chooses an algorithm: from the collective, its size, the
// world size and, when set, the user's forced choice (MCI_ALGO). A forced
// choice that does not apply to a collective falls back to the default.
#pragma once

#include <cstddef>

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

// `shm`: every rank is on this host and shares a segment. A forced TCP
// algorithm (ring, recursive_doubling, tree) takes that collective off
// shared memory; a forced `direct` means shm_direct there.
Algo select_algo(OpKind kind, std::size_t bytes, int world, Algo forced, bool shm = false);

}  // namespace mci::coll
