// torch tensors as mci buffers: the checks every operation makes, the dtype
// and reduction mapping, and staging for tensors that are not contiguous.
// The texts match the pure-Python backend's (process_group.py).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "mci/types.hpp"

namespace mci_torch {

// Throws mci::ConfigError "mci_torch: <text>".
[[noreturn]] void fail_config(const std::string& text);

// As Python prints torch.<name> (float32, not Float).
std::string dtype_text(at::ScalarType s);

// A dense CPU tensor (any dtype: reductions check theirs, reduction.hpp);
// what names it in the message.
void check_tensor(const at::Tensor& t, const std::string& what = "tensor");
// mci's type for s, when mci has one.
std::optional<mci::DType> carried_dtype(at::ScalarType s);
// The tensor's memory as it is (t must be contiguous): typed when mci has
// its dtype, else as bytes.
mci::BufferView view_of(const at::Tensor& t);

// A contiguous tensor to hand to mci and the copy that writes it back into
// the caller's tensors afterwards (nothing to do when they were contiguous).
struct Staged {
  at::Tensor buffer;
  std::function<void()> back;
};
Staged staged(const at::Tensor& t);
// Several tensors of one dtype as one flat buffer.
Staged flat(const std::vector<at::Tensor>& tensors);

}  // namespace mci_torch
