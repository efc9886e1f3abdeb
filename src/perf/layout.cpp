#include "perf/layout.hpp"

#include <algorithm>

namespace mci::perf {

Layout layout_for(OpKind c, std::size_t count, std::size_t element_size, int ranks) {
  const auto n = static_cast<std::size_t>(std::max(ranks, 1));
  const OpShape& s = op_shape(c);
  Layout l;
  if (!moves_data(c)) return l;
  // A kind with a buffer per rank splits the nominal count into blocks; the
  // others move it whole (the pair: both its buffers).
  const bool split = s.in == BufferExtent::per_rank || s.out == BufferExtent::per_rank;
  const std::size_t unit = split ? count / n : count;
  auto extent = [&](BufferExtent e) {
    if (s.p2p) return unit;
    return e == BufferExtent::none ? 0 : e == BufferExtent::per_rank ? unit * n : unit;
  };
  l.in_count = extent(s.in);
  l.out_count = extent(s.out);
  l.block_count = unit;
  l.bytes = std::max(l.in_count, l.out_count) * element_size;
  return l;
}

}  // namespace mci::perf
