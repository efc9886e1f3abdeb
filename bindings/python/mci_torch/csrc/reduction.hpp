// How the backend reduces a torch dtype with a torch ReduceOp on mci,
// whose reductions take f32, f64, f16, bf16, i8, u8, i32 and i64.
//
// The other dtypes torch 2.x has are reduced exactly through one of those:
// int16 and uint16 widened to int32, uint32 to int64 (then narrowed back,
// which keeps the wrap-around of the narrow type); uint64 as the int64 of
// the same bits (sum and product are the same bits; for MIN and MAX the
// top bit flipped, which maps unsigned order onto signed order); complex
// as pairs of reals (SUM, AVG, PREMUL_SUM). bool's SUM/MAX are "or",
// PRODUCT/MIN "and", as ProcessGroupNCCL. BAND/BOR/BXOR are done here on
// the gathered values. PREMUL_SUM (FSDP2's gradient divide factor)
// multiplies the input by the factor, then sums. What cannot be done
// exactly (float8, float4, quantized types; PRODUCT, MIN, MAX of complex;
// AVG of uint64) is refused with what to do instead.
#pragma once

#include <optional>
#include <string>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "mci/types.hpp"

namespace mci_torch {

std::string op_name(const c10d::ReduceOp& op);

class Reduction {
 public:
  // what names the operation in the error. Throws mci::ConfigError when
  // mci cannot do op on dtype.
  Reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const std::string& what);

  // The bitwise ops: every rank's values gathered (input()'s), then
  // reduced by bitwise_reduce.
  bool bitwise() const { return !code_; }
  mci::ReduceOp code() const { return *code_; }

  // The values mci reduces for t (contiguous, of the dtype given): t's own
  // memory when no conversion is needed (a view for complex), else a
  // converted copy; with the PREMUL_SUM factor applied. in_place: t's
  // memory may be scaled (its result overwrites it anyway); else t is left
  // as it is.
  at::Tensor input(const at::Tensor& t, bool in_place) const;
  // Where mci writes the result meant for t (contiguous): t's memory, or a
  // buffer of the reduced dtype.
  at::Tensor output_for(const at::Tensor& t) const;
  // The result in out (from input() or output_for() of t) written into t;
  // nothing to do when out is t's memory.
  void write_back(const at::Tensor& out, const at::Tensor& t) const;
  // rows (ranks x n, from input()) combined with BAND, BOR or BXOR.
  at::Tensor bitwise_reduce(const at::Tensor& rows) const;

 private:
  enum class Via { same, widen, same_bits, flip_top_bit, real_pairs };
  c10d::ReduceOp op_;
  at::ScalarType dtype_;
  Via via_ = Via::same;
  at::ScalarType as_;                  // the dtype mci reduces
  std::optional<mci::ReduceOp> code_;  // nullopt: bitwise
};

}  // namespace mci_torch
