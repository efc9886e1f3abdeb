#include <cstdint>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "ddp/reducer.hpp"
#include "mci/ddp.hpp"
#include "mci/errors.hpp"

namespace mci {

struct DistributedDataParallel::Impl {
  std::shared_ptr<ProcessGroup> pg;
  std::vector<Parameter> params;
  std::unique_ptr<ddp::Reducer> reducer;
};

namespace {

// A short description of the model's shape that every rank must share.
std::vector<std::int64_t> signature(const std::vector<Parameter>& params) {
  std::uint64_t h = 1469598103934665603ull;
  std::int64_t total = 0;
  for (const auto& p : params) {
    for (std::uint64_t v : {static_cast<std::uint64_t>(p.value.count), static_cast<std::uint64_t>(p.value.dtype)}) {
      h = (h ^ v) * 1099511628211ull;
    }
    total += static_cast<std::int64_t>(p.value.count);
  }
  return {static_cast<std::int64_t>(params.size()), total, static_cast<std::int64_t>(h)};
}

// Every rank's (count, dtype) per parameter, padded to `most` parameters;
// names the first parameter of this rank that differs from another rank's.
std::string first_difference(ProcessGroup& g, const std::vector<Parameter>& params, std::size_t most) {
  std::vector<std::int64_t> mine(most * 2, -1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    mine[2 * i] = static_cast<std::int64_t>(params[i].value.count);
    mine[2 * i + 1] = static_cast<std::int64_t>(params[i].value.dtype);
  }
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(g.size()));
  g.all_gather(view(mine), view(all));
  auto describe = [](const std::int64_t* e) {
    return e[0] < 0 ? std::string("no parameter")
                    : fmt::format("{} {} values", e[0], dtype_name(static_cast<DType>(e[1])));
  };
  for (std::size_t i = 0; i < most; ++i) {
    for (int r = 0; r < g.size(); ++r) {
      const std::int64_t* theirs = all.data() + mine.size() * static_cast<std::size_t>(r) + 2 * i;
      if (theirs[0] == mine[2 * i] && theirs[1] == mine[2 * i + 1]) continue;
      const std::string name = i < params.size() ? "'" + params[i].name + "'" : "(none here)";
      return fmt::format(
          "DistributedDataParallel: the model differs between ranks at parameter {} {}: rank {} has {}, rank {} "
          "has {}. Every rank must wrap the same model (same parameters, in the same order, with the same "
          "shapes and dtypes).",
          i, name, g.rank(), describe(mine.data() + 2 * i), r, describe(theirs));
    }
  }
  return "DistributedDataParallel: the model differs between ranks (same sizes, different order)";
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<ProcessGroup> pg,
                                                 std::vector<Parameter> params, DdpOptions opts)
    : impl_(std::make_unique<Impl>()) {
  if (!pg) throw ConfigError("DistributedDataParallel needs a process group (got a null pointer)");
  for (const auto& p : params) {
    if (p.grad.count != p.value.count || p.grad.dtype != p.value.dtype || p.grad.device != p.value.device) {
      throw ConfigError(fmt::format(
          "DistributedDataParallel: parameter '{}' has {} {} values on {} but its gradient has {} {} "
          "on {}; a gradient must match its parameter",
          p.name, p.value.count, dtype_name(p.value.dtype), p.value.device.str(), p.grad.count,
          dtype_name(p.grad.dtype), p.grad.device.str()));
    }
  }
  impl_->pg = std::move(pg);
  impl_->params = std::move(params);
  ProcessGroup& g = *impl_->pg;

  // Every replica must have the same parameters, or the bucketed all-reduces
  // would pair unrelated gradients.
  const auto mine = signature(impl_->params);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(g.size()));
  g.all_gather(view(mine), view(all));
  bool same = true;
  std::int64_t most = 0;
  for (int r = 0; r < g.size(); ++r) {
    const std::int64_t* s = all.data() + mine.size() * static_cast<std::size_t>(r);
    same = same && s[0] == mine[0] && s[1] == mine[1] && s[2] == mine[2];
    most = std::max(most, s[0]);
  }
  // Every rank sees the same summaries, so all of them take this branch and
  // its second all-gather together.
  if (!same) throw MismatchError(first_difference(g, impl_->params, static_cast<std::size_t>(most)));
  if (opts.broadcast_parameters) {
    for (auto& p : impl_->params) g.broadcast(p.value, 0);
  }
  impl_->reducer = std::make_unique<ddp::Reducer>(g, impl_->params, opts.bucket_cap_bytes);
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::grad_ready(std::size_t i) { impl_->reducer->grad_ready(i); }
void DistributedDataParallel::finish_gradient_sync() { impl_->reducer->finish(); }
std::size_t DistributedDataParallel::num_buckets() const { return impl_->reducer->num_buckets(); }
const std::vector<Parameter>& DistributedDataParallel::parameters() const { return impl_->params; }
ProcessGroup& DistributedDataParallel::process_group() const { return *impl_->pg; }

}  // namespace mci
