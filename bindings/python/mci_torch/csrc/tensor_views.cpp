#include "tensor_views.hpp"

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include "mci/errors.hpp"

namespace mci_torch {
namespace {

using R = c10d::ReduceOp;

// As Python prints torch.<name>.
std::string dtype_text(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return c10::toString(s);
  }
}

}  // namespace

void fail_config(const std::string& text) { throw mci::ConfigError("mci_torch: " + text); }

mci::DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return mci::DType::f32;
    case at::kDouble: return mci::DType::f64;
    case at::kHalf: return mci::DType::f16;
    case at::kBFloat16: return mci::DType::bf16;
    case at::kChar: return mci::DType::i8;
    case at::kByte: return mci::DType::u8;
    case at::kInt: return mci::DType::i32;
    case at::kLong: return mci::DType::i64;
    case at::kBool: return mci::DType::u8;  // one byte, 0 or 1
    default: break;
  }
  fail_config("tensor has dtype torch." + dtype_text(t.scalar_type()) +
              ", which mci does not carry; use one of float32, float64, float16, bfloat16, int8, uint8, int32, "
              "int64, bool");
}

void check_tensor(const at::Tensor& t, const std::string& what) {
  if (!t.defined()) fail_config(what + " is None, not a torch.Tensor");
  if (!t.device().is_cpu()) {
    fail_config(what + " is on " + t.device().str() +
                ": the mci backend takes CPU tensors; use backend 'nccl' for CUDA tensors (or move the tensor to "
                "the CPU)");
  }
  if (t.layout() != at::kStrided) fail_config(what + " has a sparse layout: the mci backend takes dense tensors");
  try {
    (void)dtype_of(t);
  } catch (const mci::ConfigError&) {
    fail_config(what + " has dtype torch." + dtype_text(t.scalar_type()) +
                ", which mci does not carry; use one of float32, float64, float16, bfloat16, int8, uint8, int32, "
                "int64, bool");
  }
}

mci::BufferView view_of(const at::Tensor& t) {
  return mci::BufferView{t.numel() ? t.data_ptr() : nullptr, static_cast<std::size_t>(t.numel()), dtype_of(t)};
}

std::string op_name(const c10d::ReduceOp& op) {
  static const char* const names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  const auto i = static_cast<std::size_t>(op.op_);
  return i < std::size(names) ? names[i] : "UNUSED";
}

std::optional<mci::ReduceOp> reduce_code(const c10d::ReduceOp& op, at::ScalarType dtype) {
  if (dtype == at::kBool) {
    // bool: sum and max are "or", product and min are "and" (as ProcessGroupNCCL).
    switch (op.op_) {
      case R::SUM:
      case R::MAX:
      case R::BOR: return mci::ReduceOp::max;
      case R::PRODUCT:
      case R::MIN:
      case R::BAND: return mci::ReduceOp::min;
      case R::BXOR: return std::nullopt;
      default:
        fail_config("ReduceOp " + op_name(op) +
                    " does not apply to bool tensors; use SUM/MAX (or), PRODUCT/MIN (and) or BXOR");
    }
  }
  switch (op.op_) {
    case R::SUM: return mci::ReduceOp::sum;
    case R::AVG: return mci::ReduceOp::avg;
    case R::PRODUCT: return mci::ReduceOp::prod;
    case R::MIN: return mci::ReduceOp::min;
    case R::MAX: return mci::ReduceOp::max;
    case R::BAND:
    case R::BOR:
    case R::BXOR:
      if (at::isFloatingType(dtype)) {
        fail_config("ReduceOp " + op_name(op) + " needs an integer (or bool) tensor, not torch." + dtype_text(dtype));
      }
      return std::nullopt;
    default: break;
  }
  fail_config("ReduceOp " + op_name(op) +
              " is not supported by mci (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR are; PREMUL_SUM is not yet)");
}

at::Tensor bitwise_reduce(const c10d::ReduceOp& op, const at::Tensor& rows) {
  at::Tensor acc = rows[0].clone();
  for (const auto i : c10::irange<int64_t>(1, rows.size(0))) {
    if (op.op_ == R::BAND) {
      acc.bitwise_and_(rows[i]);
    } else if (op.op_ == R::BOR) {
      acc.bitwise_or_(rows[i]);
    } else {
      acc.bitwise_xor_(rows[i]);
    }
  }
  return acc;
}

Staged staged(const at::Tensor& t) {
  if (t.is_contiguous()) return {t, [] {}};
  at::Tensor work = t.contiguous();
  return {work, [t, work]() mutable { t.copy_(work); }};
}

Staged flat(const std::vector<at::Tensor>& tensors) {
  if (tensors.size() == 1) return staged(tensors[0]);
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].scalar_type() != tensors[0].scalar_type()) {
      fail_config("the tensors of one call must share a dtype, but tensor 0 is torch." +
                  dtype_text(tensors[0].scalar_type()) + " and tensor " + std::to_string(i) + " is torch." +
                  dtype_text(tensors[i].scalar_type()) + ": make one call per dtype");
    }
  }
  std::vector<at::Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const auto& t : tensors) pieces.push_back(t.reshape({-1}));
  at::Tensor buffer = at::cat(pieces);
  return {buffer, [tensors, buffer]() mutable {
            int64_t offset = 0;
            for (auto& t : tensors) {
              t.copy_(buffer.narrow(0, offset, t.numel()).view_as(t));
              offset += t.numel();
            }
          }};
}

}  // namespace mci_torch
