// Copies into memory that another core will read next. On this class of
// machine, writing a cache line the other core has just read costs tens of
// nanoseconds per line (the line bounces between the cores), so large copies
// use streaming (non-temporal) stores, which bypass the cache; small ones,
// where plain stores win, use memcpy. Ends with a store fence, so a release
// store of a flag after it also publishes the streamed data.
#pragma once

#include <cstddef>

namespace mci::coll {

// Below this many bytes, plain stores are faster (measured on the 2-vCPU VMs
// this project runs on: ~16 KiB).
inline constexpr std::size_t kStreamingThreshold = 16 * 1024;

void copy_to_shared(void* dst, const void* src, std::size_t n);

}  // namespace mci::coll
