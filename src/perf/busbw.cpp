#include "perf/busbw.hpp"

namespace mci::perf {

double bus_factor(Collective c, int ranks) noexcept {
  if (ranks < 1) return 0;
  const double n = ranks;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::gather:
    case Collective::scatter: return (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send_recv: return 1.0;
    case Collective::barrier: return 0.0;
  }
  return 0;
}

Bandwidth bandwidth(Collective c, int ranks, std::size_t bytes, double seconds) noexcept {
  Bandwidth b;
  if (seconds <= 0 || !moves_data(c)) return b;
  b.algbw_GBps = static_cast<double>(bytes) / 1e9 / seconds;
  b.busbw_GBps = b.algbw_GBps * bus_factor(c, ranks);
  return b;
}

}  // namespace mci::perf
