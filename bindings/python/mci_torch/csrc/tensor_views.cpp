#include "tensor_views.hpp"

#include <ATen/ATen.h>

#include "mci/errors.hpp"

namespace mci_torch {

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
    case at::ScalarType::ComplexHalf: return "complex32";
    case at::ScalarType::UInt16: return "uint16";
    case at::ScalarType::UInt32: return "uint32";
    case at::ScalarType::UInt64: return "uint64";
    case at::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case at::ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    case at::ScalarType::Float8_e5m2: return "float8_e5m2";
    case at::ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    case at::ScalarType::Float8_e8m0fnu: return "float8_e8m0fnu";
    default: return c10::toString(s);
  }
}

void fail_config(const std::string& text) { throw mci::ConfigError("mci_torch: " + text); }

std::optional<mci::DType> carried_dtype(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return mci::DType::f32;
    case at::kDouble: return mci::DType::f64;
    case at::kHalf: return mci::DType::f16;
    case at::kBFloat16: return mci::DType::bf16;
    case at::kChar: return mci::DType::i8;
    case at::kByte: return mci::DType::u8;
    case at::kInt: return mci::DType::i32;
    case at::kLong: return mci::DType::i64;
    case at::kBool: return mci::DType::u8;  // one byte, 0 or 1
    default: return std::nullopt;
  }
}

void check_tensor(const at::Tensor& t, const std::string& what) {
  if (!t.defined()) fail_config(what + " is None, not a torch.Tensor");
  if (!t.device().is_cpu()) {
    fail_config(what + " is on " + t.device().str() +
                ": the mci backend takes CPU tensors; use backend 'nccl' for CUDA tensors (init_process_group("
                "\"cpu:mci,cuda:nccl\") sends each tensor to its device's backend), or move the tensor to the CPU");
  }
  if (t.layout() != at::kStrided) fail_config(what + " has a sparse layout: the mci backend takes dense tensors");
}

mci::BufferView view_of(const at::Tensor& t) {
  void* data = t.numel() ? t.data_ptr() : nullptr;
  if (const auto d = carried_dtype(t.scalar_type()))
    return mci::BufferView{data, static_cast<std::size_t>(t.numel()), *d};
  // Moved as its bytes (int16, unsigned, complex, float8, ...): exact for
  // every operation that only moves data; reductions go through Reduction,
  // which never hands mci such a view.
  return mci::BufferView{data, static_cast<std::size_t>(t.numel()) * t.element_size(), mci::DType::u8};
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
