#include "backend.hpp"

#include <algorithm>
#include <cstdio>

#include <ATen/ATen.h>

#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "reduction.hpp"
#include "tensor_views.hpp"

namespace mci_torch {
namespace {

using c10d::OpType;

// torch's asyncOp: false when its function was called with async_op=False
// and waits on the Work at once; the op then runs on the caller's thread.
template <class Opts>
bool async_of(const Opts& opts) {
  return opts.asyncOp;
}

std::string numel_text(const at::Tensor& t) {
  return std::to_string(t.numel()) + " " + std::string(c10::toString(t.scalar_type()));
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

BackendMCI::BackendMCI(BackendConfig config) : c10d::Backend(config.rank, config.size), config_(std::move(config)) {
  if (config_.enable_reconfigure) return;  // the group comes with reconfigure()
  mci::InitOptions o = mci::options_through_store(config_.host, config_.port, config_.token, config_.rank, config_.size,
                                                  config_.timeout);
  o.backend = config_.engine;
  o.group_name = config_.group_name;
  o.settings = config_.settings;
  pg_ = mci::init_process_group(o);
}

#if MCI_TORCH_HAS_SET_TIMEOUT
void BackendMCI::setTimeout(std::chrono::milliseconds timeout) {
  group().set_timeout(timeout);  // a ConfigError for a timeout of 0 or less
  config_.timeout = timeout;
}
#endif

namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

BackendMCI::BackendMCI(BackendConfig config, std::shared_ptr<mci::ProcessGroup> pg)
    : c10d::Backend(config.rank, config.size), config_(std::move(config)), pg_(std::move(pg)) {}

BackendMCI::~BackendMCI() {
  join_abort();
  shutdown();
}

bool BackendMCI::supportsShrinking() const {
  const auto info = mci::find_backend_info(config_.engine);
  return info && info->caps.shrinks;
}

std::vector<int64_t> BackendMCI::agree_lost() {
  if (!agreed_) agreed_ = group().shrink();
  return {agreed_->lost.begin(), agreed_->lost.end()};
}

c10::intrusive_ptr<c10d::Backend> BackendMCI::shrink(const std::vector<int64_t>& ranks_to_exclude, int /*shrink_flags*/,
                                                     const c10::intrusive_ptr<Options>& opts_override) {
  // SHRINK_ABORT or not, mci aborts the old group first: a peer still inside
  // an operation with a lost rank fails at once rather than at its timeout.
  std::vector<int> exclude(ranks_to_exclude.begin(), ranks_to_exclude.end());
  std::sort(exclude.begin(), exclude.end());
  mci::ProcessGroup::Shrunk s;
  if (agreed_ && agreed_->lost == exclude) {
    s = std::move(*agreed_);
  } else {
    s = group().shrink(exclude);
    if (s.lost != exclude) {
      // Torch numbers the new group from its own list: a rank mci also
      // found lost would make the two disagree.
      fail_config("shrink_group: rank(s) " + ranks_text(exclude) +
                  " were excluded, but the survivors also lost rank(s) not in that list (lost: " + ranks_text(s.lost) +
                  "); call mci_torch.shrink_group(), which finds them, or exclude them all");
    }
  }
  agreed_.reset();
  BackendConfig c = config_;
  c.rank = s.group->rank();
  c.size = s.group->size();
  const std::vector<int> mine = global_ranks();
  c.global_ranks.clear();
  for (int r : s.kept) c.global_ranks.push_back(mine.at(static_cast<std::size_t>(r)));
  if (opts_override && opts_override->timeout.count() > 0) c.timeout = opts_override->timeout;
  auto b = c10::make_intrusive<BackendMCI>(std::move(c), std::move(s.group));
  if (config_.track) config_.track(b);
  return b;
}

void BackendMCI::shutdown() {
  completer_.reset();  // completes what is queued first
  pg_.reset();
}

void BackendMCI::abort() {
  std::lock_guard lock(abort_mu_);
  if (aborted_) return;
  aborted_ = true;
  // mci's abort drains what its progress thread runs: on a thread of its
  // own, so that this returns at once (torch calls abort from watchdogs
  // and signal paths). The thread holds the group until it is done.
  if (pg_) abort_thread_ = std::thread([pg = pg_] { pg->abort("torch aborted the group"); });
}

void BackendMCI::join_abort() {
  std::lock_guard lock(abort_mu_);
  if (abort_thread_.joinable()) abort_thread_.join();
}

c10::intrusive_ptr<c10d::Backend::Options> BackendMCI::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("mci", config_.timeout);
  o->group_name = config_.group_name;
  return o;
}

c10::intrusive_ptr<c10d::Backend> BackendMCI::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::vector<int>& ranks,
                                                    const c10::intrusive_ptr<Options>& opts) {
  const auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end()) return nullptr;
  if (!config_.make_group) fail_config("split_group: this group was made without mci_torch's rendezvous");
  const auto timeout = opts && opts->timeout.count() > 0 ? opts->timeout : config_.timeout;
  auto made = config_.make_group(store, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()), timeout);
  // Its members' global ranks, for its dumps: this group's, of the ranks listed.
  if (auto* split = dynamic_cast<BackendMCI*>(made.get())) {
    const std::vector<int> mine = global_ranks();
    split->config_.global_ranks.clear();
    for (int r : ranks) split->config_.global_ranks.push_back(mine.at(static_cast<std::size_t>(r)));
  }
  return made;
}

void BackendMCI::close_at_exit() {
  if (pg_ && completer_ && completer_->pending()) {
    pg_->abort("the process is exiting with operations still running (nobody waited on them)");
  }
  shutdown();
}

mci::ProcessGroup& BackendMCI::group() const {
  if (aborted_) {
    fail_config(
        "this group was aborted (abort()); reconfigure it (dist._reconfigure with a fresh uuid) or make a "
        "new one");
  }
  if (!pg_ && config_.enable_reconfigure) {
    fail_config(
        "this group was made with enable_reconfigure=True and has no members yet: call dist._reconfigure("
        "uuid, handles) first, with every member's dist._get_reconfigure_handle()");
  }
  if (!pg_) fail_config("this group was shut down (destroy_process_group); make a new one");
  return *pg_;
}

void BackendMCI::name_for_dumps() {
  mci::ProcessGroup& g = group();
  if (named_.load(std::memory_order_acquire) == &g) return;
  g.name_for_dumps(getGroupUid(), getGroupDesc(), global_ranks());
  named_.store(&g, std::memory_order_release);
}

std::vector<int> BackendMCI::global_ranks() const {
  if (static_cast<int>(config_.global_ranks.size()) == getSize()) return config_.global_ranks;
  std::vector<int> v(static_cast<std::size_t>(getSize()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

std::string BackendMCI::dump_flight_recorder(const std::string& prefix) {
  name_for_dumps();
  return group().dump_flight_recorder(prefix);
}

c10::intrusive_ptr<c10d::Work> BackendMCI::submit(Call call) {
  unseen_->throw_first();
  name_for_dumps();
  auto w = c10::make_intrusive<WorkMCI>(getRank(), call.type, call.what, std::move(call.outputs),
                                        std::move(call.finish), std::move(call.keep));
  if (!call.async) {
    // The caller waits at once: run here, raise here.
    mci::Work done = call.run(mci::Exec::blocking);
    w->complete(done, unseen_);
    w->wait();
    return w;
  }
  mci::Work queued = call.run(mci::Exec::async);
  if (queued.is_completed() && !(completer_ && completer_->pending())) {
    // Already finished (a short one the progress thread ran meanwhile):
    // complete it here rather than wake a completer thread for it.
    w->complete(queued, unseen_);
    return w;
  }
  if (!completer_) completer_ = std::make_unique<Completer>(unseen_);
  completer_->push(w, std::move(queued));
  return w;
}

void BackendMCI::check_root(int64_t root, const char* what) const {
  if (root < 0 || root >= getSize()) {
    fail_config(std::string(what) + ": root " + std::to_string(root) + " is outside [0, " + std::to_string(getSize()) +
                ")");
  }
}

void BackendMCI::one_per_rank(const at::Tensor& ref, const std::vector<at::Tensor>& tensors, const std::string& what,
                              const std::string& side) const {
  if (static_cast<int>(tensors.size()) != getSize()) {
    fail_config(what + " needs " + std::to_string(getSize()) + " " + side + " tensors (one per rank), got " +
                std::to_string(tensors.size()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(tensors[i], what + " " + side + " " + std::to_string(i));
    if (tensors[i].numel() != ref.numel() || tensors[i].scalar_type() != ref.scalar_type()) {
      fail_config(what + ": " + side + " " + std::to_string(i) + " has " + numel_text(tensors[i]) +
                  " elements, the other side " + numel_text(ref));
    }
  }
}

void BackendMCI::check_whole(const std::string& op, const std::string& whole_name, const at::Tensor& whole,
                             const at::Tensor& share) const {
  check_tensor(whole, op + " " + whole_name);
  check_tensor(share, op + " " + (whole_name == "output" ? "input" : "output"));
  if (whole.numel() != share.numel() * getSize() || whole.scalar_type() != share.scalar_type()) {
    fail_config(op + ": the " + whole_name + " needs " + std::to_string(getSize()) + " x " + numel_text(share) +
                " elements, it has " + numel_text(whole));
  }
}

// collectives ---------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> BackendMCI::allreduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) return sparse_allreduce(tensors[0], opts);
  for (const auto& t : tensors) check_tensor(t);
  if (tensors.empty()) fail_config("all_reduce needs a tensor");
  Staged buf = flat(tensors);
  const at::Tensor b = buf.buffer;
  const Reduction red(opts.reduceOp, b.scalar_type(), "all_reduce");
  // In place: the result overwrites the input, which may be scaled first.
  const at::Tensor x = red.input(b, /*in_place=*/true);
  if (red.bitwise()) {
    // Bitwise: every rank's values, reduced here.
    at::Tensor gathered = at::empty({getSize(), x.numel()}, x.options());
    return submit({OpType::ALLREDUCE,
                   "all_reduce",
                   async_of(opts),
                   [this, x, gathered](mci::Exec e) { return group().all_gather(view_of(x), view_of(gathered), e); },
                   tensors,
                   [x, b, gathered, red, back = buf.back]() mutable {
                     x.view({-1}).copy_(red.bitwise_reduce(gathered));
                     red.write_back(x, b);
                     back();
                   },
                   {b, x, gathered}});
  }
  return submit({OpType::ALLREDUCE,
                 "all_reduce",
                 async_of(opts),
                 [this, x, code = red.code()](mci::Exec e) { return group().all_reduce(view_of(x), code, e); },
                 tensors,
                 [x, b, red, back = buf.back]() mutable {
                   red.write_back(x, b);
                   back();
                 },
                 {b, x}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  if (!t.device().is_cpu())
    fail_config("all_reduce of a sparse tensor: it is on " + t.device().str() + ", mci takes CPU tensors");
  if (opts.reduceOp != c10d::ReduceOp::SUM) {
    fail_config("all_reduce of a sparse tensor takes SUM only (got " + op_name(opts.reduceOp) +
                "); make it dense (to_dense()) for other reductions");
  }
  const at::Tensor in = t.coalesce();
  const at::Tensor idx = in.indices().contiguous();  // [sparse dims, nnz], int64
  const at::Tensor vals = in.values().contiguous();  // [nnz, dense dims...]
  // Every rank's nnz first (one small blocking all_gather): rows are padded
  // to the largest, and each rank's entries cut back out of its row.
  unseen_->throw_first();
  const int64_t n = getSize();
  std::vector<int64_t> counts(static_cast<std::size_t>(n));
  int64_t mine = in._nnz();
  group().all_gather(mci::view(&mine, 1), mci::view(counts.data(), counts.size())).wait();
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  const int64_t sparse_dims = idx.size(0);
  int64_t value_row = 1;  // elements per entry (the dense dimensions)
  for (int64_t d = 1; d < vals.dim(); ++d) value_row *= vals.size(d);
  // One row per rank: its indices, then its values, each as bytes.
  const int64_t idx_bytes = sparse_dims * longest * 8;
  const int64_t val_bytes = value_row * longest * static_cast<int64_t>(vals.element_size());
  const at::Tensor row = at::zeros({idx_bytes + val_bytes}, at::kByte);
  if (mine) {
    row.narrow(0, 0, idx.numel() * 8).copy_(idx.reshape({-1}).view(at::kByte));
    row.narrow(0, idx_bytes, vals.numel() * vals.element_size()).copy_(vals.reshape({-1}).view(at::kByte));
  }
  const at::Tensor rows = at::empty({n, row.numel()}, row.options());
  at::Tensor target = t;
  return submit(
      {OpType::ALLREDUCE,
       "all_reduce",
       async_of(opts),
       [this, row, rows](mci::Exec e) { return group().all_gather(view_of(row), view_of(rows), e); },
       {t},
       [rows, counts, longest, sparse_dims, value_row, idx_bytes, vals, in, target]() mutable {
         std::vector<at::Tensor> all_idx;
         std::vector<at::Tensor> all_vals;
         std::vector<int64_t> value_shape = vals.sizes().vec();
         for (std::size_t r = 0; r < counts.size(); ++r) {
           const int64_t k = counts[r];
           const at::Tensor rr = rows[static_cast<int64_t>(r)];
           // Cloned: a row's offset need not suit the wider dtype.
           all_idx.push_back(rr.narrow(0, 0, sparse_dims * longest * 8)
                                 .clone()
                                 .view(at::kLong)
                                 .view({sparse_dims, longest})
                                 .narrow(1, 0, k));
           value_shape[0] = longest;
           all_vals.push_back(rr.narrow(0, idx_bytes, value_row * longest * static_cast<int64_t>(vals.element_size()))
                                  .clone()
                                  .view(vals.scalar_type())
                                  .view(value_shape)
                                  .narrow(0, 0, k));
         }
         const at::Tensor sum = at::sparse_coo_tensor(at::cat(all_idx, 1), at::cat(all_vals, 0), in.sizes()).coalesce();
         target.copy_(sum);
       },
       {row, rows, in}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceCoalescedOptions& opts) {
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> BackendMCI::broadcast(std::vector<at::Tensor>& tensors,
                                                     const c10d::BroadcastOptions& opts) {
  check_root(opts.rootRank, "broadcast");
  for (const auto& t : tensors) check_tensor(t);
  if (tensors.empty()) fail_config("broadcast needs a tensor");
  Staged buf = flat(tensors);
  const at::Tensor b = buf.buffer;
  const int root = static_cast<int>(opts.rootRank);
  return submit({OpType::BROADCAST,
                 "broadcast",
                 async_of(opts),
                 [this, b, root](mci::Exec e) { return group().broadcast(view_of(b), root, e); },
                 tensors,
                 buf.back,
                 {b}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  if (tensors.size() != 1) fail_config("reduce takes one tensor");
  check_tensor(tensors[0]);
  check_root(opts.rootRank, "reduce");
  const Reduction red(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  if (red.bitwise())
    fail_config("reduce with " + op_name(opts.reduceOp) + ": use all_reduce for the bitwise operations");
  Staged buf = staged(tensors[0]);
  const at::Tensor b = buf.buffer;
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = getRank() == root;
  // Only the root's tensor takes the result: the others' stay as they were
  // (not even scaled by a PREMUL_SUM factor).
  const at::Tensor x = red.input(b, /*in_place=*/at_root);
  return submit({OpType::REDUCE,
                 "reduce",
                 async_of(opts),
                 [this, x, root, code = red.code()](mci::Exec e) { return group().reduce(view_of(x), root, code, e); },
                 tensors,
                 [x, b, red, at_root, back = buf.back]() mutable {
                   if (!at_root) return;
                   red.write_back(x, b);
                   back();
                 },
                 {b, x}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) {
  if (inputs.size() != 1 || outputs.size() != 1) fail_config("all_gather takes one input and one list of outputs");
  check_tensor(inputs[0], "all_gather input");
  one_per_rank(inputs[0], outputs[0], "all_gather", "output");
  const at::Tensor src = inputs[0].contiguous();
  const at::Tensor rows = at::empty({getSize(), src.numel()}, src.options());
  std::vector<at::Tensor> outs = outputs[0];
  return submit({OpType::ALLGATHER,
                 "all_gather",
                 async_of(opts),
                 [this, src, rows](mci::Exec e) { return group().all_gather(view_of(src), view_of(rows), e); },
                 outs,
                 [rows, outs]() mutable {
                   for (std::size_t i = 0; i < outs.size(); ++i) {
                     outs[i].copy_(rows[static_cast<int64_t>(i)].view_as(outs[i]));
                   }
                 },
                 {src, rows}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                           const c10d::AllgatherOptions& opts) {
  check_whole("all_gather_into_tensor", "output", output, input);
  const at::Tensor src = input.contiguous();
  Staged out = staged(output);
  const at::Tensor o = out.buffer;
  return submit({OpType::_ALLGATHER_BASE,
                 "all_gather",
                 async_of(opts),
                 [this, src, o](mci::Exec e) { return group().all_gather(view_of(src), view_of(o), e); },
                 {output},
                 out.back,
                 {src, o}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  const std::string what = "all_gather_into_tensor_coalesced";
  if (inputs.empty() || inputs.size() != outputs.size()) {
    fail_config(what + " needs one output per input and at least one, got " + std::to_string(outputs.size()) +
                " outputs and " + std::to_string(inputs.size()) + " inputs");
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    check_whole(what + " (tensor " + std::to_string(k) + ")", "output", outputs[k], inputs[k]);
  }
  // One all_gather of every input packed in a row: rank r's row holds its
  // inputs one after the other, so output k is the same columns of every
  // row. Inputs of one dtype travel as that dtype (mci's mismatch report
  // then names it); mixed dtypes travel as their bytes, which a gather
  // moves unchanged.
  const bool one_dtype = std::all_of(inputs.begin(), inputs.end(),
                                     [&](const at::Tensor& t) { return t.scalar_type() == inputs[0].scalar_type(); });
  std::vector<at::Tensor> pieces;
  std::vector<int64_t> widths;
  for (const auto& t : inputs) {
    at::Tensor piece = t.contiguous().reshape({-1});
    if (!one_dtype) piece = piece.view(at::kByte);
    widths.push_back(piece.numel());
    pieces.push_back(std::move(piece));
  }
  const at::Tensor src = pieces.size() == 1 ? pieces[0] : at::cat(pieces);
  const at::Tensor rows = at::empty({getSize(), src.numel()}, src.options());
  std::vector<at::Tensor> outs = outputs;
  return submit({OpType::COALESCED,
                 "all_gather",
                 async_of(opts),
                 [this, src, rows](mci::Exec e) { return group().all_gather(view_of(src), view_of(rows), e); },
                 outs,
                 [rows, outs, widths, one_dtype]() mutable {
                   int64_t offset = 0;
                   for (std::size_t k = 0; k < outs.size(); ++k) {
                     at::Tensor cols = rows.narrow(1, offset, widths[k]);
                     if (!one_dtype) cols = cols.contiguous().view(outs[k].scalar_type());
                     outs[k].copy_(cols.reshape(outs[k].sizes()));
                     offset += widths[k];
                   }
                 },
                 {src, rows}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  const std::string what = "all_gather_coalesced";
  if (static_cast<int>(outputs.size()) != getSize()) {
    fail_config(what + " needs " + std::to_string(getSize()) + " output lists (one per rank), got " +
                std::to_string(outputs.size()));
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) check_tensor(inputs[k], what + " input " + std::to_string(k));
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    if (outputs[r].size() != inputs.size()) {
      fail_config(what + ": output list " + std::to_string(r) + " has " + std::to_string(outputs[r].size()) +
                  " tensors, but there are " + std::to_string(inputs.size()) + " inputs (one output per input)");
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const at::Tensor& o = outputs[r][k];
      check_tensor(o, what + " output " + std::to_string(r) + "/" + std::to_string(k));
      if (o.numel() != inputs[k].numel() || o.scalar_type() != inputs[k].scalar_type()) {
        fail_config(what + ": output " + std::to_string(r) + "/" + std::to_string(k) + " has " + numel_text(o) +
                    " elements, input " + std::to_string(k) + " " + numel_text(inputs[k]));
      }
    }
  }
  // Every input's bytes in one row; rank r's row holds its inputs one
  // after the other, so output [r][k] is a slice of row r.
  std::vector<at::Tensor> pieces;
  std::vector<int64_t> widths;
  for (const auto& t : inputs) {
    at::Tensor piece = t.contiguous().reshape({-1}).view(at::kByte);
    widths.push_back(piece.numel());
    pieces.push_back(std::move(piece));
  }
  const at::Tensor src = pieces.empty() ? at::empty({0}, at::kByte) : at::cat(pieces);
  const at::Tensor rows = at::empty({getSize(), src.numel()}, src.options());
  std::vector<std::vector<at::Tensor>> outs = outputs;
  std::vector<at::Tensor> result;
  for (const auto& list : outputs) result.insert(result.end(), list.begin(), list.end());
  return submit({OpType::ALLGATHER_COALESCED,
                 "all_gather",
                 async_of(opts),
                 [this, src, rows](mci::Exec e) { return group().all_gather(view_of(src), view_of(rows), e); },
                 std::move(result),
                 [rows, outs, widths]() mutable {
                   for (std::size_t r = 0; r < outs.size(); ++r) {
                     int64_t offset = 0;
                     for (std::size_t k = 0; k < outs[r].size(); ++k) {
                       at::Tensor& o = outs[r][k];
                       const at::Tensor bytes = rows[static_cast<int64_t>(r)].narrow(0, offset, widths[k]).contiguous();
                       o.copy_(bytes.view(o.scalar_type()).view(o.sizes()));
                       offset += widths[k];
                     }
                   }
                 },
                 {src, rows}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                  std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  if (inputs.size() != 1) fail_config("gather takes one input tensor");
  check_tensor(inputs[0], "gather input");
  check_root(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = getRank() == root;
  const at::Tensor src = inputs[0].contiguous();
  std::vector<at::Tensor> outs;
  if (at_root) {
    if (outputs.size() != 1) fail_config("gather takes one list of output tensors on the root");
    one_per_rank(src, outputs[0], "gather", "output");
    outs = outputs[0];
  }
  const at::Tensor rows = at_root ? at::empty({getSize(), src.numel()}, src.options()) : at::empty({0}, src.options());
  return submit({OpType::GATHER,
                 "gather",
                 async_of(opts),
                 [this, src, rows, root](mci::Exec e) { return group().gather(view_of(src), view_of(rows), root, e); },
                 outs,
                 [rows, outs]() mutable {
                   for (std::size_t i = 0; i < outs.size(); ++i) {
                     outs[i].copy_(rows[static_cast<int64_t>(i)].view_as(outs[i]));
                   }
                 },
                 {src, rows}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::scatter(std::vector<at::Tensor>& outputs,
                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                   const c10d::ScatterOptions& opts) {
  if (outputs.size() != 1) fail_config("scatter takes one output tensor");
  check_tensor(outputs[0], "scatter output");
  check_root(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor rows = at::empty({0}, outputs[0].options());
  if (getRank() == root) {
    if (inputs.size() != 1) fail_config("scatter takes one list of input tensors on the root");
    one_per_rank(outputs[0], inputs[0], "scatter", "input");
    std::vector<at::Tensor> flat_ins;
    for (const auto& t : inputs[0]) flat_ins.push_back(t.reshape({-1}));
    rows = at::stack(flat_ins);
  }
  Staged dst = staged(outputs[0]);
  const at::Tensor d = dst.buffer;
  return submit({OpType::SCATTER,
                 "scatter",
                 async_of(opts),
                 [this, rows, d, root](mci::Exec e) { return group().scatter(view_of(rows), view_of(d), root, e); },
                 outputs,
                 dst.back,
                 {rows, d}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() != 1 || inputs.size() != 1) fail_config("reduce_scatter takes one output and one list of inputs");
  check_tensor(outputs[0], "reduce_scatter output");
  one_per_rank(outputs[0], inputs[0], "reduce_scatter", "input");
  std::vector<at::Tensor> flat_ins;
  for (const auto& t : inputs[0]) flat_ins.push_back(t.reshape({-1}));
  return reduce_scatter_flat(outputs[0], at::stack(flat_ins), opts.reduceOp, async_of(opts), outputs);
}

c10::intrusive_ptr<c10d::Work> BackendMCI::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::ReduceScatterOptions& opts) {
  check_whole("reduce_scatter_tensor", "input", input, output);
  return reduce_scatter_flat(output, input.contiguous(), opts.reduceOp, async_of(opts), {output});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::ReduceScatterOptions& opts) {
  const std::string what = "reduce_scatter_tensor_coalesced";
  if (inputs.empty() || inputs.size() != outputs.size()) {
    fail_config(what + " needs one output per input and at least one, got " + std::to_string(outputs.size()) +
                " outputs and " + std::to_string(inputs.size()) + " inputs");
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    check_whole(what + " (tensor " + std::to_string(k) + ")", "input", inputs[k], outputs[k]);
    if (inputs[k].scalar_type() != inputs[0].scalar_type()) {
      // A reduction needs one dtype for the whole buffer.
      fail_config(what + ": tensor " + std::to_string(k) + " is " + numel_text(inputs[k]) + " but tensor 0 is " +
                  numel_text(inputs[0]) + "; a reduction takes one dtype: make one call per dtype");
    }
  }
  // One reduce_scatter: the packed input's block for rank r is the r-th
  // block of every input, one after the other, so rank r receives its
  // share of each.
  std::vector<at::Tensor> blocks;
  std::vector<int64_t> widths;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    widths.push_back(outputs[k].numel());
    blocks.push_back(inputs[k].reshape({getSize(), widths.back()}));
  }
  const at::Tensor packed = blocks.size() == 1 ? blocks[0].contiguous() : at::cat(blocks, 1);
  const Reduction red(opts.reduceOp, packed.scalar_type(), what);
  if (red.bitwise())
    fail_config(what + " with " + op_name(opts.reduceOp) + ": use all_reduce for the bitwise operations");
  const at::Tensor in = red.input(packed, /*in_place=*/false);
  const at::Tensor mine = at::empty({packed.size(1)}, packed.options());
  const at::Tensor d = red.output_for(mine);
  std::vector<at::Tensor> outs = outputs;
  return submit({OpType::COALESCED,
                 "reduce_scatter",
                 async_of(opts),
                 [this, in, d, code = red.code()](mci::Exec e) {
                   return group().reduce_scatter(view_of(in), view_of(d), code, e);
                 },
                 outs,
                 [mine, d, red, outs, widths]() mutable {
                   red.write_back(d, mine);
                   int64_t offset = 0;
                   for (std::size_t k = 0; k < outs.size(); ++k) {
                     outs[k].copy_(mine.narrow(0, offset, widths[k]).view(outs[k].sizes()));
                     offset += widths[k];
                   }
                 },
                 {packed, in, mine, d}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::reduce_scatter_flat(at::Tensor out, at::Tensor flat_in,
                                                               const c10d::ReduceOp& op, bool async,
                                                               std::vector<at::Tensor> result) {
  const Reduction red(op, out.scalar_type(), "reduce_scatter");
  if (red.bitwise()) fail_config("reduce_scatter with " + op_name(op) + ": use all_reduce for the bitwise operations");
  const at::Tensor in = red.input(flat_in, /*in_place=*/false);  // may be the caller's input
  Staged dst = staged(out);
  const at::Tensor o = dst.buffer;
  const at::Tensor d = red.output_for(o);
  return submit({OpType::REDUCE_SCATTER,
                 "reduce_scatter",
                 async,
                 [this, in, d, code = red.code()](mci::Exec e) {
                   return group().reduce_scatter(view_of(in), view_of(d), code, e);
                 },
                 std::move(result),
                 [d, o, red, back = dst.back]() mutable {
                   red.write_back(d, o);
                   back();
                 },
                 {flat_in, in, o, d}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                         std::vector<int64_t>& output_split_sizes,
                                                         std::vector<int64_t>& input_split_sizes,
                                                         const c10d::AllToAllOptions& opts) {
  check_tensor(output, "all_to_all_single output");
  check_tensor(input, "all_to_all_single input");
  const int64_t n = getSize();
  if (input_split_sizes.empty() && output_split_sizes.empty()) {
    if (input.numel() % n || output.numel() % n) {
      fail_config("all_to_all_single: " + std::to_string(input.numel()) + " elements do not split evenly over " +
                  std::to_string(n) + " ranks; pass input_split_sizes and output_split_sizes");
    }
    const at::Tensor src = input.contiguous();
    Staged dst = staged(output);
    const at::Tensor d = dst.buffer;
    return submit({OpType::ALLTOALL_BASE,
                   "all_to_all",
                   async_of(opts),
                   [this, src, d](mci::Exec e) { return group().all_to_all(view_of(src), view_of(d), e); },
                   {output},
                   dst.back,
                   {src, d}});
  }
  // Splits of different sizes (in rows of the first dimension).
  const int64_t row_in = input.dim() && input.size(0) ? input[0].numel() : 1;
  const int64_t row_out = output.dim() && output.size(0) ? output[0].numel() : 1;
  std::vector<int64_t> ins = input_split_sizes;
  std::vector<int64_t> outs = output_split_sizes;
  if (ins.empty()) ins.assign(n, input.dim() ? input.size(0) / n : 0);
  if (outs.empty()) outs.assign(n, output.dim() ? output.size(0) / n : 0);
  if (static_cast<int64_t>(ins.size()) != n || static_cast<int64_t>(outs.size()) != n) {
    fail_config("all_to_all_single: the split sizes need " + std::to_string(n) + " entries each, got " +
                std::to_string(ins.size()) + " and " + std::to_string(outs.size()));
  }
  const at::Tensor whole = input.reshape({-1});
  std::vector<at::Tensor> pieces;
  int64_t offset = 0;
  for (const int64_t rows : ins) {
    pieces.push_back(whole.narrow(0, offset * row_in, rows * row_in));
    offset += rows;
  }
  for (auto& c : outs) c *= row_out;
  return uneven_all_to_all(std::move(pieces), output, std::move(outs), async_of(opts), nullptr, {output});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                    const c10d::AllToAllOptions& opts) {
  const auto n = static_cast<std::size_t>(getSize());
  if (inputs.size() != n || outputs.size() != n) {
    fail_config("all_to_all needs " + std::to_string(n) + " input and " + std::to_string(n) + " output tensors, got " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  }
  for (const auto& t : inputs) check_tensor(t, "all_to_all tensor");
  for (const auto& t : outputs) check_tensor(t, "all_to_all tensor");
  std::vector<at::Tensor> pieces;
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const auto& t : inputs) pieces.push_back(t.reshape({-1}));
  for (const auto& t : outputs) {
    counts.push_back(t.numel());
    total += t.numel();
  }
  const at::Tensor flat_out = at::empty({total}, outputs[0].options());
  std::vector<at::Tensor> outs = outputs;
  return uneven_all_to_all(
      std::move(pieces), flat_out, counts, async_of(opts),
      [flat_out, outs]() mutable {
        int64_t offset = 0;
        for (auto& t : outs) {
          t.copy_(flat_out.narrow(0, offset, t.numel()).view_as(t));
          offset += t.numel();
        }
      },
      outputs);
}

// Slices of different sizes: every slice padded to the longest in the job
// (one small blocking all-reduce finds it), one all_to_all, then the
// received slices packed into output.
c10::intrusive_ptr<c10d::Work> BackendMCI::uneven_all_to_all(std::vector<at::Tensor> pieces, at::Tensor output,
                                                             std::vector<int64_t> out_counts, bool async,
                                                             std::function<void()> after,
                                                             std::vector<at::Tensor> result) {
  const int64_t n = getSize();
  int64_t longest = 0;
  for (const auto& p : pieces) longest = std::max(longest, p.numel());
  for (const auto c : out_counts) longest = std::max(longest, c);
  unseen_->throw_first();
  group().all_reduce(mci::view(&longest, 1), mci::ReduceOp::max).wait();
  const auto dtype_opts = pieces.empty() ? output.options() : pieces[0].options();
  const at::Tensor send = at::zeros({n, longest}, dtype_opts);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    send[static_cast<int64_t>(j)].narrow(0, 0, pieces[j].numel()).copy_(pieces[j]);
  }
  const at::Tensor recv = at::empty({n, longest}, dtype_opts);
  Staged dst = staged(output);
  const at::Tensor d = dst.buffer.view({-1});
  const auto width = static_cast<std::size_t>(longest);
  return submit(
      {OpType::ALLTOALL_BASE,
       "all_to_all",
       async,
       [this, send, recv, width](mci::Exec e) {
         if (width == 0) return group().barrier(e);
         return group().all_to_all(view_of(send), view_of(recv), e);
       },
       std::move(result),
       [recv, d, out_counts, back = dst.back, after]() mutable {
         int64_t offset = 0;
         for (std::size_t i = 0; i < out_counts.size(); ++i) {
           d.narrow(0, offset, out_counts[i]).copy_(recv[static_cast<int64_t>(i)].narrow(0, 0, out_counts[i]));
           offset += out_counts[i];
         }
         back();
         if (after) after();
       },
       {send, recv, d}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::barrier(const c10d::BarrierOptions& opts) {
  return submit({OpType::BARRIER,
                 "barrier",
                 async_of(opts),
                 [this](mci::Exec e) { return group().barrier(e); },
                 {},
                 nullptr,
                 {}});
}

// point-to-point ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> BackendMCI::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  if (tensors.size() != 1) fail_config("send takes one tensor");
  check_tensor(tensors[0], "send tensor");
  if (dst < 0 || dst >= getSize() || dst == getRank()) {
    fail_config("send to rank " + std::to_string(dst) + ": the peer must be another rank in [0, " +
                std::to_string(getSize()) + ")");
  }
  const at::Tensor src = tensors[0].contiguous();
  return submit({OpType::SEND,
                 "send",
                 true,
                 [this, src, dst, tag](mci::Exec e) { return group().send(view_of(src), dst, tag, e); },
                 tensors,
                 nullptr,
                 {src}});
}

c10::intrusive_ptr<c10d::Work> BackendMCI::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  if (tensors.size() != 1) fail_config("recv takes one tensor");
  check_tensor(tensors[0], "recv tensor");
  if (src < 0 || src >= getSize() || src == getRank()) {
    fail_config("recv from rank " + std::to_string(src) + ": the peer must be another rank in [0, " +
                std::to_string(getSize()) + ")");
  }
  Staged dst = staged(tensors[0]);
  const at::Tensor d = dst.buffer;
  return submit({OpType::RECV,
                 "recv",
                 true,
                 [this, d, src, tag](mci::Exec e) { return group().recv(view_of(d), src, tag, e); },
                 tensors,
                 dst.back,
                 {d}});
}

// The oldest matching send of whichever rank's arrives first (mci's
// any_source); the Work's sourceRank() names that rank.
c10::intrusive_ptr<c10d::Work> BackendMCI::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  if (tensors.size() != 1) fail_config("recv takes one tensor");
  check_tensor(tensors[0], "recv tensor");
  if (getSize() == 1) fail_config("recv from any source in a group of one rank: no other rank can send");
  Staged dst = staged(tensors[0]);
  const at::Tensor d = dst.buffer;
  return submit({OpType::RECVANYSOURCE,
                 "recv",
                 true,
                 [this, d, tag](mci::Exec e) { return group().recv(view_of(d), mci::any_source, tag, e); },
                 tensors,
                 dst.back,
                 {d}});
}

// gloo's monitored barrier, over torch's store for this group: rank 0 waits
// at most the timeout for every other rank and names the missing ones; the
// others wait as long for rank 0's release. The timeout is the one given,
// zero included (rank 0 then only looks whether the others are there);
// only torch's "unset" (negative) means the group's. Every error starts
// with gloo's sentence (what torch's tests and users' log parsers read),
// then says mci's.
void BackendMCI::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  if (!config_.torch_store) fail_config("monitored_barrier needs the group's store");
  const auto limit = opts.timeout.count() >= 0 ? opts.timeout : config_.timeout;
  const std::string ms = std::to_string(limit.count());
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof seconds_text, "%g", static_cast<double>(limit.count()) / 1000.0);
  const std::string seconds = seconds_text;
  ++monitored_rounds_;
  const std::string prefix = "mci_torch/monitored_barrier/" + std::to_string(monitored_rounds_) + "/";
  const std::string what = "monitored_barrier #" + std::to_string(monitored_rounds_);
  auto& store = *config_.torch_store;
  // torch's Store::wait takes zero as "no timeout": a zero budget is a
  // check, never a wait.
  const auto arrived = [&](const std::string& key, std::chrono::milliseconds left) {
    try {
      if (left.count() > 0) {
        store.wait({key}, left);
        return true;
      }
      return store.check({key});
    } catch (const std::exception&) {
      return false;
    }
  };
  const std::string me = std::to_string(getRank());
  if (getRank() != 0) {
    store.set(prefix + me, bytes("1"));
    if (!arrived(prefix + "release", limit)) {
      throw mci::TimeoutError("Rank " + me +
                              " successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                              "from rank 0. Please check rank 0 logs for faulty rank. mci_torch: " +
                              what + ": rank " + me + " arrived, but rank 0 did not release it within " + seconds +
                              "s: rank 0 has not reached the barrier, or found ranks missing (its error names them)");
    }
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> missing;
  std::vector<int> passed;
  for (int r = 1; r < getSize(); ++r) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (arrived(prefix + std::to_string(r), left)) {
      passed.push_back(r);
      continue;
    }
    if (!wait_all_ranks && left.count() <= 0) {
      // The budget was spent before this rank's turn: gloo's "timed out".
      throw mci::TimeoutError("Rank 0 timed out in monitoredBarrier after " + ms +
                              " ms. Current rank: " + std::to_string(r) + ". " +
                              (passed.empty() ? std::string("No ranks successfully processed in monitoredBarrier.")
                                              : "Successfully processed ranks: " + ranks_text(passed) + ".") +
                              " mci_torch: " + what + ": rank " + std::to_string(r) + " had not reached it when the " +
                              seconds + "s timeout ran out. That rank is stuck or slower before this barrier.");
    }
    missing.push_back(r);
    if (!wait_all_ranks) break;
  }
  if (!missing.empty()) {
    const std::string names = ranks_text(missing);
    const bool many = missing.size() > 1;
    throw mci::TimeoutError(
        "[Rank 0]: " + std::string(many ? "Ranks " : "Rank ") + names + " failed to pass monitoredBarrier in " + ms +
        " ms. mci_torch: " + what + ": rank" + (many ? "s " : " ") + names + " did not reach it within " + seconds +
        "s" + (wait_all_ranks || getSize() == 2 ? "" : " (the first missing one; wait_all_ranks=True names them all)") +
        ". Those ranks are stuck or slower before this barrier.");
  }
  store.set(prefix + "release", bytes("1"));
}

}  // namespace mci_torch
