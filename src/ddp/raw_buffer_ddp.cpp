// mci::DistributedDataParallel (mci/ddp.hpp): DDP over the caller's own
// buffers, each parameter a value and a gradient BufferView. The shared
// Reducer (ddp/reducer.hpp) averages the gradients as the caller marks them
// ready (grad_ready) or, for the rest, at finish_gradient_sync. LibTorch
// modules have their own front end over the same Reducer:
// src/torch/libtorch_ddp.cpp.
#include <cstring>

#include <fmt/format.h>

#include "ddp/model_check.hpp"
#include "ddp/most_advanced.hpp"
#include "ddp/reducer.hpp"
#include "mci/ddp.hpp"
#include "mci/errors.hpp"

namespace mci {

struct DistributedDataParallel::Impl {
  std::shared_ptr<ProcessGroup> pg;
  std::vector<Parameter> params;
  std::vector<ddp::ParamInfo> infos;  // what a new Reducer needs after recover()
  DdpOptions opts;
  std::unique_ptr<ddp::Reducer> reducer;
  int source = 0;  // the rank whose replica the last sync_replicas took
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<ProcessGroup> pg, std::vector<Parameter> params,
                                                 DdpOptions opts)
    : impl_(std::make_unique<Impl>()) {
  if (!pg) throw ConfigError("DistributedDataParallel needs a process group (got a null pointer)");
  std::vector<ddp::ParamInfo> infos;
  for (const auto& p : params) {
    if (p.grad.count != p.value.count || p.grad.dtype != p.value.dtype || p.grad.device != p.value.device) {
      throw ConfigError(
          fmt::format("DistributedDataParallel: parameter '{}' has {} {} values on {} but its gradient has {} {} "
                      "on {}; a gradient must match its parameter",
                      p.name, p.value.count, dtype_name(p.value.dtype), p.value.device.str(), p.grad.count,
                      dtype_name(p.grad.dtype), p.grad.device.str()));
    }
    infos.push_back({p.name, p.value.count, p.value.dtype, p.value.device, {}});
  }
  impl_->pg = std::move(pg);
  impl_->params = std::move(params);
  ProcessGroup& g = *impl_->pg;
  ddp::check_same_model(g, infos);
  if (opts.broadcast_parameters) {
    for (auto& p : impl_->params) g.broadcast(p.value, 0);
  }
  impl_->infos = infos;
  impl_->opts = opts;
  impl_->reducer =
      std::make_unique<ddp::Reducer>(g, std::move(infos), opts.bucket_cap_bytes, std::move(opts.comm_hook));
}

DistributedDataParallel::Recovery DistributedDataParallel::recover(std::uint64_t steps_done,
                                                                   const std::vector<BufferView>& state) {
  // shrink() aborts the old group and drains its queue, so no bucket of the
  // old Reducer is still being written when it goes.
  ProcessGroup::Shrunk shrunk = impl_->pg->shrink();
  impl_->reducer.reset();
  impl_->pg = shrunk.group;
  impl_->reducer =
      std::make_unique<ddp::Reducer>(*impl_->pg, impl_->infos, impl_->opts.bucket_cap_bytes, impl_->opts.comm_hook);
  const std::uint64_t most = sync_replicas(steps_done, state);
  const int source = impl_->source;
  return Recovery{most, std::move(shrunk.lost), source};
}

DistributedDataParallel::Growth DistributedDataParallel::grow(std::uint64_t steps_done,
                                                              const std::vector<BufferView>& state) {
  ProcessGroup::Grown grown = impl_->pg->grow();
  impl_->reducer.reset();
  impl_->pg = grown.group;
  // What the joiners' constructor runs: the same model everywhere, checked.
  ddp::check_same_model(*impl_->pg, impl_->infos);
  impl_->reducer =
      std::make_unique<ddp::Reducer>(*impl_->pg, impl_->infos, impl_->opts.bucket_cap_bytes, impl_->opts.comm_hook);
  return Growth{sync_replicas(steps_done, state), grown.joined};
}

std::uint64_t DistributedDataParallel::sync_replicas(std::uint64_t steps_done, const std::vector<BufferView>& state) {
  ProcessGroup& g = *impl_->pg;
  const auto [source, most] = ddp::most_advanced(g, steps_done);
  for (auto& p : impl_->params) g.broadcast(p.value, source);
  for (const auto& s : state) g.broadcast(s, source);
  for (auto& p : impl_->params) {
    if (!p.grad.device.is_cuda() && p.grad.data) std::memset(p.grad.data, 0, p.grad.bytes());
  }
  impl_->source = source;
  return most;
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::grad_ready(std::size_t i) {
  ddp::Reducer& r = *impl_->reducer;
  r.grad_ready(i, i < impl_->params.size() ? impl_->params[i].grad : BufferView{});
}

void DistributedDataParallel::finish_gradient_sync() {
  // Gradients never marked ready are taken as they are.
  ddp::Reducer& r = *impl_->reducer;
  for (std::size_t i = 0; i < impl_->params.size(); ++i) {
    if (!r.is_ready(i)) r.grad_ready(i, impl_->params[i].grad);
  }
  r.finish();
}

std::size_t DistributedDataParallel::num_buckets() const { return impl_->reducer->num_buckets(); }
const std::vector<Parameter>& DistributedDataParallel::parameters() const { return impl_->params; }
ProcessGroup& DistributedDataParallel::process_group() const { return *impl_->pg; }
std::shared_ptr<ProcessGroup> DistributedDataParallel::group() const { return impl_->pg; }

}  // namespace mci
