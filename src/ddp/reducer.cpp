#include "ddp/reducer.hpp"

#include <algorithm>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::ddp {

Reducer::Reducer(ProcessGroup& pg, std::vector<ParamInfo> params, std::size_t cap_bytes, CommHook hook)
    : pg_(pg),
      params_(std::move(params)),
      hook_(hook ? std::move(hook) : allreduce_hook()),
      bucket_of_(params_.size()),
      grads_(params_.size()),
      ready_(params_.size(), false) {
  for (std::size_t k = params_.size(); k-- > 0;) {
    const ParamInfo& p = params_[k];
    const bool fits = !buckets_.empty() && !p.device.is_cuda() && buckets_.back().dtype == p.dtype &&
                      buckets_.back().device == p.device &&
                      (buckets_.back().count + p.count) * dtype_size(p.dtype) <= cap_bytes;
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.dtype;
      buckets_.back().device = p.device;
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.count);
    b.count += p.count;
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) {
    if (b.params.size() > 1) b.flat.resize(b.count * dtype_size(b.dtype));
  }
  reset();
}

void Reducer::reset() {
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.done = nullptr;
  }
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(grads_.begin(), grads_.end(), BufferView{});
  next_launch_ = 0;
  started_ = false;
}

BufferView Reducer::slot(std::size_t i) {
  Bucket& b = buckets_[bucket_of_[i]];
  if (b.flat.empty()) return {};
  const auto k = static_cast<std::size_t>(std::find(b.params.begin(), b.params.end(), i) - b.params.begin());
  return BufferView{b.flat.data() + b.offsets[k] * dtype_size(b.dtype), params_[i].count, b.dtype, b.device};
}

void Reducer::set_hook(CommHook hook) {
  if (started_) {
    throw ConfigError(
        "DistributedDataParallel: the communication hook can only change between steps "
        "(not during a backward); register it before the first backward");
  }
  hook_ = hook ? std::move(hook) : allreduce_hook();
}

void Reducer::grad_ready(std::size_t i, BufferView grad) {
  if (i >= params_.size()) {
    throw ConfigError(
        fmt::format("DistributedDataParallel::grad_ready({}): there are only {} parameters", i, params_.size()));
  }
  const ParamInfo& p = params_[i];
  if (ready_[i]) {
    throw ConfigError(
        fmt::format("DistributedDataParallel: the gradient of parameter '{}' was marked ready twice in one "
                    "step; call finish_gradient_sync() before the next backward",
                    p.name));
  }
  if (grad.count != p.count || grad.dtype != p.dtype || grad.device != p.device) {
    throw ConfigError(
        fmt::format("DistributedDataParallel: the gradient of parameter '{}' has {} {} values on {}, but the "
                    "parameter has {} {} values on {}; a gradient must match its parameter",
                    p.name, grad.count, dtype_name(grad.dtype), grad.device.str(), p.count, dtype_name(p.dtype),
                    p.device.str()));
  }
  grads_[i] = grad;
  ready_[i] = true;
  started_ = true;
  --buckets_[bucket_of_[i]].pending;
  launch_ready_in_order();
}

void Reducer::launch_ready_in_order() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(buckets_[next_launch_++]);
  }
}

void Reducer::launch(Bucket& b) {
  if (b.flat.empty()) {  // one parameter: average its gradient in place
    b.done = hook_(pg_, grads_[b.params[0]]);
    return;
  }
  const std::size_t es = dtype_size(b.dtype);
  for (std::size_t k = 0; k < b.params.size(); ++k) {
    const BufferView& g = grads_[b.params[k]];
    std::uint8_t* at = b.flat.data() + b.offsets[k] * es;
    if (g.bytes() && g.data != at) std::memcpy(at, g.data, g.bytes());
  }
  b.done = hook_(pg_, BufferView{b.flat.data(), b.count, b.dtype, b.device});
}

void Reducer::finish() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) {
      reset();
      throw ConfigError(
          fmt::format("DistributedDataParallel: parameter '{}' has no gradient ready at the end of the step",
                      params_[i].name));
    }
  }
  std::exception_ptr first;
  for (Bucket& b : buckets_) {
    try {
      if (b.done) b.done();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) {
    reset();
    std::rethrow_exception(first);
  }
  for (Bucket& b : buckets_) {
    if (b.flat.empty()) continue;
    const std::size_t es = dtype_size(b.dtype);
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const BufferView& g = grads_[b.params[k]];
      const std::uint8_t* at = b.flat.data() + b.offsets[k] * es;
      if (g.bytes() && g.data != at) std::memcpy(g.data, at, g.bytes());
    }
  }
  reset();
}

}  // namespace mci::ddp
