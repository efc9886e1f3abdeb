#include "ddp/reducer.hpp"

#include <cstring>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::ddp {

Reducer::Reducer(ProcessGroup& pg, const std::vector<Parameter>& params, std::size_t cap_bytes)
    : pg_(pg), params_(params), bucket_of_(params.size()), ready_(params.size(), false) {
  for (std::size_t k = params.size(); k-- > 0;) {
    const Parameter& p = params[k];
    const bool fits = !buckets_.empty() && buckets_.back().dtype == p.grad.dtype &&
                      buckets_.back().device == p.grad.device &&
                      (buckets_.back().count + p.grad.count) * dtype_size(p.grad.dtype) <= cap_bytes;
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.grad.dtype;
      buckets_.back().device = p.grad.device;
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.count);
    b.count += p.grad.count;
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) {
    if (b.params.size() > 1) {
      if (b.device.is_cuda()) {
        throw ConfigError("DistributedDataParallel: several device gradients in one bucket are not "
                          "supported yet; set DdpOptions::bucket_cap_bytes to 0 (one bucket per "
                          "parameter)");
      }
      b.flat.resize(b.count * dtype_size(b.dtype));
    }
  }
  reset();
}

void Reducer::reset() {
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_launch_ = 0;
}

void Reducer::grad_ready(std::size_t i) {
  if (i >= params_.size()) {
    throw ConfigError(fmt::format("DistributedDataParallel::grad_ready({}): there are only {} parameters",
                                  i, params_.size()));
  }
  if (ready_[i]) {
    throw ConfigError(fmt::format(
        "DistributedDataParallel: the gradient of parameter '{}' was marked ready twice in one "
        "step; call finish_gradient_sync() before the next backward",
        params_[i].name));
  }
  ready_[i] = true;
  --buckets_[bucket_of_[i]].pending;
  launch_ready_in_order();
}

void Reducer::launch_ready_in_order() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(buckets_[next_launch_++]);
  }
}

void Reducer::launch(Bucket& b) {
  const std::size_t es = dtype_size(b.dtype);
  if (b.flat.empty()) {  // one parameter: average its gradient in place
    b.work = pg_.all_reduce(params_[b.params[0]].grad, ReduceOp::avg, Exec::async);
    return;
  }
  for (std::size_t k = 0; k < b.params.size(); ++k) {
    const BufferView& g = params_[b.params[k]].grad;
    if (g.bytes()) std::memcpy(b.flat.data() + b.offsets[k] * es, g.data, g.bytes());
  }
  b.work = pg_.all_reduce(BufferView{b.flat.data(), b.count, b.dtype}, ReduceOp::avg, Exec::async);
}

void Reducer::finish() {
  for (Bucket& b : buckets_) b.pending = 0;
  launch_ready_in_order();
  std::exception_ptr first;
  for (Bucket& b : buckets_) {
    try {
      b.work.wait();
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
      const BufferView& g = params_[b.params[k]].grad;
      if (g.bytes()) std::memcpy(g.data, b.flat.data() + b.offsets[k] * es, g.bytes());
    }
  }
  reset();
}

}  // namespace mci::ddp
