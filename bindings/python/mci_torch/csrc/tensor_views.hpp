// torch tensors as mci buffers: the checks every operation makes, the dtype
// and reduction mapping, and staging for tensors that are not contiguous.
// The texts match the pure-Python backend's (process_group.py).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "mci/types.hpp"

namespace mci_torch {

// Throws mci::ConfigError "mci_torch: <text>".
[[noreturn]] void fail_config(const std::string& text);

// A dense CPU tensor of a dtype mci carries; what names it in the message.
void check_tensor(const at::Tensor& t, const std::string& what = "tensor");
mci::DType dtype_of(const at::Tensor& t);
// The tensor's memory as it is (t must be contiguous).
mci::BufferView view_of(const at::Tensor& t);

// mci's reduction for op on dtype; nullopt for the bitwise ones, which the
// backend does on gathered values.
std::optional<mci::ReduceOp> reduce_code(const c10d::ReduceOp& op, at::ScalarType dtype);
std::string op_name(const c10d::ReduceOp& op);
// rows[0] op rows[1] op ...: the bitwise reduction of a (ranks, n) tensor.
at::Tensor bitwise_reduce(const c10d::ReduceOp& op, const at::Tensor& rows);

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
