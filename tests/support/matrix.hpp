// The collective matrix: every collective, every dtype, the given sizes, in
// place and out of place, each output checked element by element against a
// reference computed locally from what every rank's input must have been
// (the same input and reference values as mci-perf's checks, src/perf/check).
#pragma once

#include <cstddef>
#include <ostream>
#include <vector>

#include "mci/process_group.hpp"

namespace mci::test {

// Counts are in bytes per rank; each dtype gets bytes / dtype_size elements
// (a size below one element becomes that many elements: 0, 1, 7, ...).
struct MatrixConfig {
  std::vector<std::size_t> elements = {0, 1, 7, 1000};
  std::vector<std::size_t> bytes = {4u << 20};
  std::vector<DType> dtypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                               DType::i8,  DType::u8,  DType::i32, DType::i64};
};

// Runs the matrix on this rank; writes one line per failure to `err` and
// returns the number of failures (all ranks run the same sequence).
int run_matrix(ProcessGroup& pg, const MatrixConfig& cfg, std::ostream& err);

}  // namespace mci::test
