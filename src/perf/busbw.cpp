#include "perf/busbw.hpp"

namespace mci::perf {

Bandwidth bandwidth(OpKind c, int ranks, std::size_t bytes, double seconds) noexcept {
  Bandwidth b;
  if (seconds <= 0 || !moves_data(c)) return b;
  b.algbw_GBps = static_cast<double>(bytes) / 1e9 / seconds;
  b.busbw_GBps = b.algbw_GBps * bus_factor(c, ranks);
  return b;
}

}  // namespace mci::perf
