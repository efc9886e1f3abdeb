// DistributedDataParallel for LibTorch (PyTorch's C++ frontend): wraps a
// torch::nn::Module so that every backward averages its gradients across
// the ranks of a process group, as torch.nn.parallel.DistributedDataParallel
// does in Python. Link mci::torch (find_package(mci COMPONENTS torch)).
//
//   auto pg = mci::init_process_group();
//   torch::nn::Linear model(784, 10);
//   mci::torch::DistributedDataParallel ddp(pg, model);  // broadcasts rank 0's weights
//   torch::optim::SGD opt(model->parameters(), 0.01);
//   for (...) {
//     opt.zero_grad();
//     auto loss = torch::nn::functional::cross_entropy(ddp(x), y);
//     loss.backward();  // gradients averaged across ranks when it returns
//     opt.step();
//   }
//
// Gradients are packed into buckets (bucket_cap_mb, in reverse order of
// registration); autograd hooks start each bucket's async all-reduce as soon
// as its gradients are ready, so communication overlaps the rest of
// backward, and backward returns once every bucket is averaged and written
// back. docs/libtorch.md maps every option to PyTorch's.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "mci/ddp.hpp"
#include "mci/process_group.hpp"

namespace mci::torch {

struct DdpOptions {
  // Gradients are packed into buckets of about this many MiB; each bucket
  // is one all-reduce. 0: one bucket per parameter.
  double bucket_cap_mb = 25.0;
  // Broadcast rank 0's buffers (running statistics, ...) before every
  // forward, as PyTorch does; parameters and buffers are always broadcast
  // at construction.
  bool broadcast_buffers = true;
  // Parameters that get no gradient in a backward take part with their
  // current gradient (zeros when they have none). Without it such a
  // backward still keeps every rank in step, then throws a ConfigError
  // naming those parameters.
  bool find_unused_parameters = false;
  // How each bucket is averaged (mci/ddp.hpp): allreduce_hook() when empty,
  // or bf16_compress_hook().
  CommHook comm_hook;
};

namespace detail {

// The part of DistributedDataParallel that is not a template: the reducer,
// the autograd hooks and the state they share.
class Replica {
 public:
  // Collective: checks that every rank wraps the same model (MismatchError
  // naming the first parameter that differs), broadcasts rank 0's
  // parameters and buffers, lays out buckets and installs the hooks.
  Replica(std::shared_ptr<ProcessGroup> pg, std::shared_ptr<::torch::nn::Module> module, DdpOptions opts);
  ~Replica();
  Replica(Replica&&) noexcept;
  Replica& operator=(Replica&&) noexcept;

  void before_forward();
  // DistributedDataParallel::recover's work (not a template).
  mci::DistributedDataParallel::Recovery recover(std::uint64_t steps_done, std::vector<at::Tensor> state);
  void set_sync(bool on);
  bool sync() const;
  void register_comm_hook(CommHook hook);
  std::size_t num_buckets() const;
  ProcessGroup& process_group() const;

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the hooks, which hold it weakly
};

template <class M>
std::shared_ptr<::torch::nn::Module> as_module(const M& m) {
  if constexpr (requires { m.ptr(); }) {
    return m.ptr();  // a ModuleHolder (torch::nn::Linear, TORCH_MODULE types)
  } else {
    return m;  // a std::shared_ptr to a Module
  }
}

}  // namespace detail

// Wraps a ModuleHolder (torch::nn::Linear, a TORCH_MODULE type) or a
// std::shared_ptr to a torch::nn::Module subclass with a forward().
template <class ModuleRef>
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<ProcessGroup> pg, ModuleRef module, DdpOptions opts = {})
      : module_(std::move(module)), replica_(std::move(pg), detail::as_module(module_), std::move(opts)) {}

  // The module's forward, unchanged (after the buffers' broadcast).
  template <class... Args>
  decltype(auto) forward(Args&&... args) {
    replica_.before_forward();
    return module_->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }
  ModuleRef& module() { return module_; }
  auto operator->() { return &*module_; }

  // Gradient accumulation: backwards run while the guard lives only
  // accumulate locally; the first backward after it averages the sum.
  class [[nodiscard]] NoSync {
   public:
    explicit NoSync(detail::Replica& r) : r_(&r), before_(r.sync()) { r.set_sync(false); }
    ~NoSync() { r_->set_sync(before_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    detail::Replica* r_;
    bool before_;
  };
  NoSync no_sync() { return NoSync(replica_); }

  // Going on without a lost rank (docs/fault-tolerance.md, "In place"): after
  // a PeerError in a step, every surviving rank calls recover(). The group
  // shrinks (ProcessGroup::shrink), the survivor that completed the most
  // optimizer steps gives everyone its parameters, buffers and `state` (the
  // optimizer's buffers, e.g. SGD's momentum_buffer), gradients are zeroed,
  // and this DDP runs on the survivors' group: redo step steps_done + 1.
  mci::DistributedDataParallel::Recovery recover(std::uint64_t steps_done, std::vector<at::Tensor> state = {}) {
    return replica_.recover(steps_done, std::move(state));
  }

  // Before the first backward, like PyTorch's register_comm_hook.
  void register_comm_hook(CommHook hook) { replica_.register_comm_hook(std::move(hook)); }
  std::size_t num_buckets() const { return replica_.num_buckets(); }
  ProcessGroup& process_group() const { return replica_.process_group(); }

 private:
  ModuleRef module_;
  detail::Replica replica_;
};

}  // namespace mci::torch
