// mci::torch::DistributedDataParallel: LibTorch's autograd drives the
// shared gradient Reducer (src/ddp). A post hook on each parameter's
// AccumulateGrad node marks its gradient ready the moment autograd has
// written it; the first hook of a backward queues an engine callback that
// runs when backward ends and completes the step, so backward returns with
// averaged gradients. c10d's own Reducer is not used: its header does not
// compile from Debian's libtorch-dev.
//
// Gradients of parameters that share a bucket live in it (PyTorch's
// gradient_as_bucket_view): the reducer then neither copies them in nor out.
// LibTorch 2.x's optimizer.zero_grad() sets them to None (undefined) each
// step, and autograd would then give each a fresh tensor; so a pre hook on
// each AccumulateGrad node puts a zeroed bucket view back just before
// autograd writes the gradient, which it then accumulates into in place
// (a memset, as zero_grad(false) costs). PyTorch's reducer instead copies
// the fresh gradient into the bucket once per step and re-points it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "ddp/model_check.hpp"
#include "ddp/most_advanced.hpp"
#include "ddp/reducer.hpp"
#include "mci/errors.hpp"
#include "mci/torch.hpp"

namespace mci::torch::detail {
namespace {

DType dtype_of_tensor(const at::Tensor& t, const std::string& name) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kChar: return DType::i8;
    case at::kByte:
    case at::kBool: return DType::u8;  // one byte each; only ever broadcast
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    default:
      throw ConfigError(
          fmt::format("DistributedDataParallel: '{}' has dtype {}, which mci cannot communicate "
                      "(it takes float, double, half, bfloat16 and 8/32/64-bit integers)",
                      name, c10::toString(t.scalar_type())));
  }
}

Device device_of_tensor(const at::Tensor& t, const std::string& name) {
  if (t.is_cpu()) return Device::cpu();
  if (t.is_cuda()) return Device::cuda(t.get_device());
  throw ConfigError(
      fmt::format("DistributedDataParallel: '{}' lives on {}; mci communicates host (cpu) and "
                  "CUDA tensors only",
                  name, t.device().str()));
}

// A contiguous tensor's memory as a BufferView.
BufferView view_of(const at::Tensor& t, const std::string& name) {
  return BufferView{t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype_of_tensor(t, name),
                    device_of_tensor(t, name)};
}

ddp::ParamInfo info_of(const std::string& name, const at::Tensor& t) {
  const auto sizes = t.sizes();
  return {name, static_cast<std::size_t>(t.numel()), dtype_of_tensor(t, name), device_of_tensor(t, name),
          std::vector<std::int64_t>(sizes.begin(), sizes.end())};
}

// Every rank's tensor <- root's, through a contiguous copy when needed.
void broadcast_from(ProcessGroup& pg, at::Tensor& t, const std::string& name, int root = 0) {
  at::Tensor c = t.contiguous();
  pg.broadcast(view_of(c, name), root);
  if (!c.is_same(t)) {
    at::NoGradGuard no_grad;
    t.copy_(c);
  }
}

// The gradient autograd just wrote (or the one kept from earlier steps),
// contiguous so that the reducer can read and write it as one buffer.
at::Tensor& contiguous_grad(at::Tensor& param) {
  at::Tensor& g = param.mutable_grad();
  if (!g.defined()) {
    g = at::zeros_like(param, at::MemoryFormat::Contiguous);
  } else if (!g.is_contiguous()) {
    g = g.contiguous();
  }
  return g;
}

}  // namespace

struct Replica::State : std::enable_shared_from_this<Replica::State> {
  std::shared_ptr<ProcessGroup> pg;
  std::shared_ptr<::torch::nn::Module> module;
  DdpOptions opts;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;  // those that require a gradient, in registration order
  std::vector<std::string> buffer_names;
  std::vector<at::Tensor> buffers;
  std::unique_ptr<ddp::Reducer> reducer;
  // The parameters hold their AccumulateGrad nodes weakly: keep them alive
  // so our hooks stay attached, and remove the hooks when DDP goes away.
  // (A std::shared_ptr in LibTorch 1.13, a c10::intrusive_ptr in 2.x.)
  using NodePtr = decltype(::torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
  std::vector<NodePtr> accumulators;
  std::vector<std::uintptr_t> hook_keys;
  std::vector<const ::torch::autograd::FunctionPreHook*> pre_hooks;  // ours, to remove
  // Gradients that live in the reducer's buckets (no copy in or out).
  std::vector<bool> in_bucket;
  bool sync = true;
  bool callback_queued = false;

  ~State() {
    for (std::size_t i = 0; i < accumulators.size() && i < hook_keys.size(); ++i) {
      accumulators[i]->del_post_hook(hook_keys[i]);
    }
    // Node has no del_pre_hook: ours are found by address.
    for (std::size_t i = 0; i < accumulators.size() && i < pre_hooks.size(); ++i) {
      if (!pre_hooks[i]) continue;
      auto& hooks = accumulators[i]->pre_hooks();
      std::erase_if(hooks, [&](const auto& h) { return h.get() == pre_hooks[i]; });
    }
    // The buckets go with us; gradients still in them move to memory of their own.
    for (std::size_t i = 0; i < in_bucket.size(); ++i) {
      at::Tensor& g = params[i].mutable_grad();
      if (in_bucket[i] && g.defined() && g.data_ptr() == reducer->slot(i).data) g = g.clone();
    }
  }

  // PyTorch's gradient_as_bucket_view: each gradient of a shared bucket is
  // a tensor over its place in the bucket, so that autograd accumulates
  // into the bucket directly. Not an autograd view (from_blob), so
  // optimizers' zero_grad() may detach_() it.
  void place_gradients_in_buckets() {
    in_bucket.assign(params.size(), false);
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!reducer->slot(i).data) continue;
      in_bucket[i] = true;
      grad_in_bucket(i);
    }
  }

  // Parameter i's gradient (in_bucket[i]), made to live in its bucket if it
  // does not: zeros there when it is undefined (zero_grad() of LibTorch 2.x,
  // or a gradient set to None), a copy when it was replaced by another
  // tensor (then once: it stays in the bucket).
  at::Tensor& grad_in_bucket(std::size_t i) {
    const BufferView slot = reducer->slot(i);
    at::Tensor& p = params[i];
    at::Tensor& g = p.mutable_grad();
    if (g.defined() && g.data_ptr() == slot.data) return g;
    at::Tensor alias = at::from_blob(slot.data, p.sizes(), p.options().requires_grad(false));
    if (g.defined()) {
      alias.copy_(g);
    } else {
      alias.zero_();
    }
    g = alias;
    return g;
  }

  // Before autograd accumulates parameter i's gradient of this backward.
  void before_accumulate(std::size_t i) {
    if (in_bucket[i]) grad_in_bucket(i);
  }

  // The gradient the reducer averages: in its bucket, or contiguous.
  at::Tensor& grad_for_reducer(std::size_t i) { return in_bucket[i] ? grad_in_bucket(i) : contiguous_grad(params[i]); }

  void on_grad_ready(std::size_t i) {
    if (!sync) return;  // no_sync(): gradients only accumulate
    if (!callback_queued) {
      callback_queued = true;
      ::torch::autograd::Engine::get_default_engine().queue_callback([weak = weak_from_this()] {
        if (auto s = weak.lock()) s->finish_backward();
      });
    }
    reducer->grad_ready(i, view_of(grad_for_reducer(i), names[i]));
  }

  // Runs as backward ends. Parameters whose gradient never came still take
  // part (with the gradient they hold, zeros if none), so every rank issues
  // the same collectives whatever its own graph used.
  void finish_backward() {
    callback_queued = false;
    std::vector<std::string> unused;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (reducer->is_ready(i)) continue;
      unused.push_back("'" + names[i] + "'");
      reducer->grad_ready(i, view_of(grad_for_reducer(i), names[i]));
    }
    reducer->finish();
    if (!unused.empty() && !opts.find_unused_parameters) {
      throw ConfigError(
          fmt::format("DistributedDataParallel: {} of {} parameters received no gradient in this backward: {}. "
                      "Construct DistributedDataParallel with DdpOptions::find_unused_parameters = true when the "
                      "forward does not use every parameter, or make the loss depend on all of them (the gradients "
                      "were still averaged, with these parameters' current gradients)",
                      unused.size(), params.size(), fmt::join(unused, ", ")));
    }
  }
};

namespace {

// On the AccumulateGrad node: runs with the incoming gradient, before the
// node stores or adds it into the parameter's .grad.
class BucketViewHook final : public ::torch::autograd::FunctionPreHook {
 public:
  BucketViewHook(std::weak_ptr<Replica::State> state, std::size_t index) : state_(std::move(state)), index_(index) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& grads) override {
    if (auto s = state_.lock()) s->before_accumulate(index_);
    return grads;
  }

 private:
  std::weak_ptr<Replica::State> state_;
  std::size_t index_;
};

class GradReadyHook final : public ::torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::weak_ptr<Replica::State> state, std::size_t index) : state_(std::move(state)), index_(index) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    if (auto s = state_.lock()) s->on_grad_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<Replica::State> state_;
  std::size_t index_;
};

}  // namespace

Replica::Replica(std::shared_ptr<ProcessGroup> pg, std::shared_ptr<::torch::nn::Module> module, DdpOptions opts)
    : state_(std::make_shared<State>()) {
  if (!pg) throw ConfigError("DistributedDataParallel needs a process group (got a null pointer)");
  if (!module) throw ConfigError("DistributedDataParallel needs a module (got a null pointer)");
  if (opts.bucket_cap_mb < 0) {
    throw ConfigError(
        fmt::format("DistributedDataParallel: bucket_cap_mb is {}; give 0 (one bucket per "
                    "parameter) or more",
                    opts.bucket_cap_mb));
  }
  State& s = *state_;
  s.pg = std::move(pg);
  s.module = std::move(module);
  s.opts = std::move(opts);
  std::vector<ddp::ParamInfo> infos;
  for (const auto& item : s.module->named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    s.names.push_back(item.key());
    s.params.push_back(item.value());
    infos.push_back(info_of(item.key(), item.value()));
  }
  std::vector<ddp::ParamInfo> checked = infos;
  for (const auto& item : s.module->named_buffers(/*recurse=*/true)) {
    s.buffer_names.push_back(item.key());
    s.buffers.push_back(item.value());
    checked.push_back(info_of(item.key(), item.value()));
  }
  ProcessGroup& g = *s.pg;
  ddp::check_same_model(g, checked);
  for (std::size_t i = 0; i < s.params.size(); ++i) broadcast_from(g, s.params[i], s.names[i]);
  for (std::size_t i = 0; i < s.buffers.size(); ++i) broadcast_from(g, s.buffers[i], s.buffer_names[i]);

  const auto cap = static_cast<std::size_t>(s.opts.bucket_cap_mb * 1024.0 * 1024.0);
  s.reducer = std::make_unique<ddp::Reducer>(g, std::move(infos), cap, s.opts.comm_hook);
  s.place_gradients_in_buckets();
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    auto acc = ::torch::autograd::impl::grad_accumulator(s.params[i]);
    s.hook_keys.push_back(acc->add_post_hook(std::make_unique<GradReadyHook>(state_, i)));
    if (s.in_bucket[i]) {
      auto pre = std::make_unique<BucketViewHook>(state_, i);
      s.pre_hooks.push_back(pre.get());
      acc->add_pre_hook(std::move(pre));
    } else {
      s.pre_hooks.push_back(nullptr);
    }
    s.accumulators.push_back(std::move(acc));
  }
}

Replica::~Replica() = default;
Replica::Replica(Replica&&) noexcept = default;
Replica& Replica::operator=(Replica&&) noexcept = default;

void Replica::before_forward() {
  State& s = *state_;
  if (!s.opts.broadcast_buffers) return;
  for (std::size_t i = 0; i < s.buffers.size(); ++i) broadcast_from(*s.pg, s.buffers[i], s.buffer_names[i]);
}

mci::DistributedDataParallel::Recovery Replica::recover(std::uint64_t steps_done, std::vector<at::Tensor> state) {
  State& s = *state_;
  ProcessGroup::Shrunk shrunk = s.pg->shrink();
  ProcessGroup& g = *shrunk.group;
  const auto [source, most] = ddp::most_advanced(g, steps_done);
  for (std::size_t i = 0; i < s.params.size(); ++i) broadcast_from(g, s.params[i], s.names[i], source);
  for (std::size_t i = 0; i < s.buffers.size(); ++i) broadcast_from(g, s.buffers[i], s.buffer_names[i], source);
  for (std::size_t i = 0; i < state.size(); ++i) broadcast_from(g, state[i], fmt::format("state {}", i), source);
  // The interrupted step's partial sums go; its backward is redone.
  for (auto& p : s.params) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  // A new reducer and hooks on the survivors' group (the old ones go with
  // the old state, which hands back any gradient left in its buckets).
  *this = Replica(shrunk.group, s.module, s.opts);
  return {most, std::move(shrunk.lost), source};
}

void Replica::set_sync(bool on) { state_->sync = on; }
bool Replica::sync() const { return state_->sync; }
void Replica::register_comm_hook(CommHook hook) { state_->reducer->set_hook(std::move(hook)); }
std::size_t Replica::num_buckets() const { return state_->reducer->num_buckets(); }
ProcessGroup& Replica::process_group() const { return *state_->pg; }

}  // namespace mci::torch::detail
