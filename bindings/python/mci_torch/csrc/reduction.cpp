#include "reduction.hpp"

#include <cstdint>
#include <limits>

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include "tensor_views.hpp"

namespace mci_torch {
namespace {

using R = c10d::ReduceOp;

// The signed integer type of t's width: torch's conversions and bitwise
// kernels take these for every width, where the unsigned types above
// uint8 have few kernels. bool and uint8 have all of theirs.
at::ScalarType signed_of_width(at::ScalarType s) {
  switch (s) {
    case at::kShort:
    case at::ScalarType::UInt16: return at::kShort;
    case at::kInt:
    case at::ScalarType::UInt32: return at::kInt;
    case at::kLong:
    case at::ScalarType::UInt64: return at::kLong;
    default: return s;
  }
}

// t's bits as the signed type of its width, zero-extended to `to`.
at::Tensor widen_unsigned(const at::Tensor& t, at::ScalarType to, int64_t mask) {
  return t.view(signed_of_width(t.scalar_type())).to(to).bitwise_and_(mask);
}

}  // namespace

std::string op_name(const c10d::ReduceOp& op) {
  static const char* const names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  const auto i = static_cast<std::size_t>(op.op_);
  return i < std::size(names) ? names[i] : "UNUSED";
}

Reduction::Reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const std::string& what)
    : op_(op), dtype_(dtype), as_(dtype) {
  const auto refuse = [&](const std::string& why) {
    fail_config(what + " with ReduceOp " + op_name(op) + " on a torch." + dtype_text(dtype) + " tensor: " + why);
  };
  const bool bitwise_op = op.op_ == R::BAND || op.op_ == R::BOR || op.op_ == R::BXOR;
  if (op.op_ > R::PREMUL_SUM)
    refuse("not a reduction (use SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR or PREMUL_SUM)");
  if (dtype == at::kBool) {
    // bool: sum and max are "or", product and min are "and" (as ProcessGroupNCCL).
    switch (op.op_) {
      case R::SUM:
      case R::MAX:
      case R::BOR: code_ = mci::ReduceOp::max; return;
      case R::PRODUCT:
      case R::MIN:
      case R::BAND: code_ = mci::ReduceOp::min; return;
      case R::BXOR: return;
      default: refuse("it does not apply to bool tensors; use SUM/MAX (or), PRODUCT/MIN (and) or BXOR");
    }
  }
  if (at::isFloat8Type(dtype) || dtype == at::ScalarType::Float4_e2m1fn_x2) {
    refuse(
        "mci does not reduce 8-bit or 4-bit floats; reduce in bfloat16 or float32 (t.to(torch.bfloat16)) and cast "
        "back. broadcast, all_gather and the other operations that only move data carry them as they are");
  }
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/false);
  const bool complex = at::isComplexType(dtype);
  if (!integral && !complex && !at::isFloatingType(dtype)) {
    refuse(
        "mci reduces no such dtype (quantized or bits); convert to a dtype it reduces (float32, bfloat16, int32, "
        "...) for the reduction. The operations that only move data carry it as it is");
  }
  if (bitwise_op) {
    if (!integral) refuse("the bitwise operations need an integer (or bool) tensor");
    via_ = Via::same_bits;  // gathered, then reduced here (no code)
    as_ = signed_of_width(dtype);
    return;
  }
  if (op.op_ == R::PREMUL_SUM) {
    if (integral)
      refuse("PREMUL_SUM multiplies by a real factor, so it takes floating-point tensors; use SUM and scale");
    if (!op.supplement_) refuse("the op carries no factor; make it with dist._make_nccl_premul_sum(factor)");
  }
  switch (op.op_) {
    case R::SUM:
    case R::PREMUL_SUM: code_ = mci::ReduceOp::sum; break;
    case R::AVG: code_ = mci::ReduceOp::avg; break;
    case R::PRODUCT: code_ = mci::ReduceOp::prod; break;
    case R::MIN: code_ = mci::ReduceOp::min; break;
    default: code_ = mci::ReduceOp::max; break;
  }
  if (carried_dtype(dtype)) return;  // mci reduces it as it is (bool was handled above)
  if (complex) {
    if (op.op_ != R::SUM && op.op_ != R::AVG && op.op_ != R::PREMUL_SUM) {
      refuse(
          "complex tensors reduce with SUM, AVG or PREMUL_SUM only (MIN and MAX have no order on complex numbers; "
          "for PRODUCT, reduce the polar form or gather and multiply)");
    }
    via_ = Via::real_pairs;
    as_ = c10::toRealValueType(dtype);
    return;
  }
  switch (dtype) {
    case at::kShort:
    case at::ScalarType::UInt16: via_ = Via::widen, as_ = at::kInt; return;
    case at::ScalarType::UInt32: via_ = Via::widen, as_ = at::kLong; return;
    case at::ScalarType::UInt64:
      as_ = at::kLong;
      if (op.op_ == R::AVG) {
        refuse(
            "the average of 64-bit unsigned integers has no exact form in mci's int64 arithmetic; use SUM and "
            "divide (or reduce as float64)");
      }
      via_ = op.op_ == R::MIN || op.op_ == R::MAX ? Via::flip_top_bit : Via::same_bits;
      return;
    default: refuse("mci reduces no such integer dtype; convert to int32 or int64 for the reduction");
  }
}

at::Tensor Reduction::input(const at::Tensor& t, bool in_place) const {
  at::Tensor x;
  bool own_memory = true;  // x is t's memory
  switch (via_) {
    case Via::same: x = t; break;
    case Via::same_bits: x = t.view(as_); break;
    case Via::real_pairs: x = at::view_as_real(t); break;
    case Via::widen:
      x = dtype_ == at::kShort ? t.to(as_)
                               : widen_unsigned(t, as_, dtype_ == at::ScalarType::UInt16 ? 0xFFFF : 0xFFFFFFFFLL);
      own_memory = false;
      break;
    case Via::flip_top_bit:
      x = t.view(at::kLong).bitwise_xor(std::numeric_limits<int64_t>::min());
      own_memory = false;
      break;
  }
  if (op_.op_ == R::PREMUL_SUM) {
    const auto* premul = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op_.supplement_.get());
    if (!premul) fail_config("PREMUL_SUM: the op's factor is not a PreMulSumSupplement");
    const at::Scalar factor =
        premul->tensor_factor.defined() ? premul->tensor_factor.item() : at::Scalar(premul->double_factor);
    if (own_memory && !in_place) {
      x = x.mul(factor);  // the caller's input stays as it is
    } else {
      x.mul_(factor);
    }
  }
  return x;
}

at::Tensor Reduction::output_for(const at::Tensor& t) const {
  switch (via_) {
    case Via::same: return t;
    case Via::same_bits: return t.view(as_);
    case Via::real_pairs: return at::view_as_real(t);
    default: return at::empty(t.sizes(), t.options().dtype(as_));
  }
}

void Reduction::write_back(const at::Tensor& out, const at::Tensor& t) const {
  if (via_ == Via::widen) {
    // Narrowed through the signed type of t's width: the same bits as the
    // narrow type's own wrap-around.
    t.view(signed_of_width(dtype_)).copy_(out);
  } else if (via_ == Via::flip_top_bit) {
    t.view(at::kLong).copy_(out.bitwise_xor(std::numeric_limits<int64_t>::min()));
  }
}

at::Tensor Reduction::bitwise_reduce(const at::Tensor& rows) const {
  at::Tensor acc = rows[0].clone();
  for (const auto i : c10::irange<int64_t>(1, rows.size(0))) {
    if (op_.op_ == R::BAND) {
      acc.bitwise_and_(rows[i]);
    } else if (op_.op_ == R::BOR) {
      acc.bitwise_or_(rows[i]);
    } else {
      acc.bitwise_xor_(rows[i]);
    }
  }
  return acc;
}

}  // namespace mci_torch
