#include "perf/layout.hpp"

#include <algorithm>

namespace mci::perf {

Layout layout_for(Collective c, std::size_t count, std::size_t element_size, int ranks) {
  const auto n = static_cast<std::size_t>(std::max(ranks, 1));
  const std::size_t block = count / n;
  Layout l;
  switch (c) {
    case Collective::all_reduce:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send_recv: l.in_count = l.out_count = l.block_count = count; break;
    case Collective::all_gather:
    case Collective::gather:
      l.in_count = block;
      l.out_count = block * n;
      l.block_count = block;
      break;
    case Collective::scatter:
    case Collective::reduce_scatter:
      l.in_count = block * n;
      l.out_count = block;
      l.block_count = block;
      break;
    case Collective::all_to_all:
      l.in_count = l.out_count = block * n;
      l.block_count = block;
      break;
    case Collective::barrier: break;
  }
  l.bytes = std::max(l.in_count, l.out_count) * element_size;
  return l;
}

}  // namespace mci::perf
