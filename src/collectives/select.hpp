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

Algo select_algo(OpKind kind, std::size_t bytes, int world, Algo forced);

}  // namespace mci::coll
