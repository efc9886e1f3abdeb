// What a run measured: one row per size, with the out-of-place and in-place
// cells nccl-tests prints, and the totals of its footer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mci/types.hpp"
#include "perf/busbw.hpp"

namespace mci::perf {

struct Cell {
  double time_us = 0;      // one iteration, combined across ranks (-a)
  double cpu_time_us = 0;  // the time to issue it (-C shows this), combined the same way
  Bandwidth bw;
  std::optional<std::uint64_t> wrong;  // summed over ranks; empty with -c 0
};

struct Row {
  std::size_t bytes = 0;     // the size column (see layout.hpp)
  std::size_t count = 0;     // the nominal element count
  DType dtype = DType::f32;  // what this row ran (-d all and -o all vary them)
  ReduceOp op = ReduceOp::sum;
  std::string timestamp;  // when the row was measured (-S)
  std::optional<Cell> out_of_place;
  std::optional<Cell> in_place;      // empty where the collective has none
  std::optional<double> barrier_us;  // with --barrier-ref
};

struct Totals {
  std::optional<std::uint64_t> wrong;  // every cell's #wrong; empty when unchecked
  double avg_busbw_GBps = 0;           // mean over every measured cell, as nccl-tests
  double peak_busbw_GBps = 0;
  double avg_time_us = 0;  // mean over every measured cell
  std::size_t cells = 0;
  bool ok() const { return !wrong || *wrong == 0; }
};

Totals summarize(const std::vector<Row>& rows);

}  // namespace mci::perf
