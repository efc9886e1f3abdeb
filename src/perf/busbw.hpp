// Bandwidths in the nccl-tests convention (its doc/PERFORMANCE.md).
// algbw = size / time. busbw = algbw x a factor that makes the number
// comparable to the link's speed whatever the collective and the world
// size: the bytes each rank must move over its busiest link, per second.
#pragma once

#include <cstddef>

#include "perf/collective.hpp"

namespace mci::perf {

// The factor is the kind's row's (mci::bus_factor, mci/op_kind.hpp):
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather and
// scatter (n-1)/n (as nccl-tests: the root receives or sends n-1 blocks);
// broadcast, reduce, send_recv 1; barrier 0 (it moves no data).

struct Bandwidth {
  double algbw_GBps = 0;  // GB/s, 1 GB = 1e9 bytes
  double busbw_GBps = 0;
};

// `bytes` is the layout's size column, `seconds` the time of one iteration.
Bandwidth bandwidth(OpKind c, int ranks, std::size_t bytes, double seconds) noexcept;

}  // namespace mci::perf
