#include "perf/result.hpp"

#include <algorithm>

namespace mci::perf {

Totals summarize(const std::vector<Row>& rows) {
  Totals t;
  double sum = 0, time_sum = 0;
  for (const Row& r : rows) {
    for (const auto* c : {&r.out_of_place, &r.in_place}) {
      if (!*c) continue;
      const Cell& cell = **c;
      ++t.cells;
      sum += cell.bw.busbw_GBps;
      time_sum += cell.time_us;
      t.peak_busbw_GBps = std::max(t.peak_busbw_GBps, cell.bw.busbw_GBps);
      if (cell.wrong) t.wrong = t.wrong.value_or(0) + *cell.wrong;
    }
  }
  if (t.cells > 0) {
    t.avg_busbw_GBps = sum / static_cast<double>(t.cells);
    t.avg_time_us = time_sum / static_cast<double>(t.cells);
  }
  return t;
}

}  // namespace mci::perf
