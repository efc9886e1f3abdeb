// The collective matrix: every collective, every dtype, the given sizes, in
// place and out of place, each output checked element by element against a
// reference computed locally from what every rank's input must have been.
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

// The value rank r contributes at index i of collective number c, already
// rounded to dtype t (so u8 sees -2 as 254). `narrow` keeps products exact.
double input_value(DType t, int r, int c, std::size_t i, bool narrow);
void put(DType t, void* base, std::size_t i, double v);
double get(DType t, const void* base, std::size_t i);
// The reference reduction of the inputs of every rank at index i.
double reference(DType t, ReduceOp op, int world, int c, std::size_t i, bool narrow,
                 const std::vector<int>& ranks);

}  // namespace mci::test
