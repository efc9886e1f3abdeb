#include "perf/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "mci/errors.hpp"
#include "mci/timing.hpp"
#include "perf/check.hpp"
#include "perf/host_ops.hpp"

namespace mci::perf {

namespace {

// Cache-line aligned, like the buffers a training job gets from its
// allocator; also what streaming stores need.
constexpr std::size_t kAlign = 64;

std::size_t largest_buffer_bytes(const Options& o, int ranks) {
  const std::size_t es = dtype_size(o.dtype);
  std::size_t most = 0;
  for (std::size_t s : size_sweep(o.sweep)) {
    const Layout l = layout_for(o.collective, s / es, es, ranks);
    most = std::max(most, std::max(l.in_count, l.out_count) * es);
  }
  return most;
}

void check_fits_group(const Options& o, int ranks) {
  if (uses_root(o.collective) && o.root >= ranks) {
    throw UsageError("-r " + std::to_string(o.root) + " is not a rank of this job: the job has ranks 0.." +
                     std::to_string(ranks - 1));
  }
  if (is_p2p(o.collective) && ranks < 2) {
    throw UsageError(
        "send_recv needs 2 ranks or more (each rank sends to the next): start the job with "
        "mcirun --nproc_per_node=2 or more");
  }
}

}  // namespace

void Runner::Buffer::Free::operator()(void* p) const noexcept { std::free(p); }

Runner::Buffer::Buffer(std::size_t n) : bytes(n) {
  const std::size_t rounded = std::max<std::size_t>(kAlign, (n + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) throw std::bad_alloc();
  // Touch every page now, so the first timed size does not pay for faults.
  std::memset(p, 0, rounded);
  data.reset(p);
}

Runner::Runner(ProcessGroup& pg, const Options& o)
    : pg_(pg),
      o_(o),
      rank_(pg.rank()),
      ranks_(pg.size()),
      es_(dtype_size(o.dtype)),
      narrow_(o.op == ReduceOp::prod && uses_reduce_op(o.collective)),
      sizes_((check_fits_group(o, pg.size()), size_sweep(o.sweep))),
      a_(largest_buffer_bytes(o, pg.size())),
      b_(a_.bytes) {
  if (o.device_cuda) {
    // A backend that drives a GPU per rank (NCCL) needs one of its own; the
    // cpu backend stages device buffers, so several of its ranks may share
    // a GPU (one GPU, two ranks).
    const int gpus = std::max(visible_gpu_count(), 1);
    device_ = Device::cuda(o.caps.gpu_per_rank ? pg.local_rank() : pg.local_rank() % gpus);
    da_ = std::make_unique<DeviceMemory>(device_, a_.bytes);
    db_ = std::make_unique<DeviceMemory>(device_, b_.bytes);
  }
}

Runner::~Runner() = default;

Runner::Views Runner::views(const Layout& l, bool in_place) const {
  if (da_) {
    return views_on(l, in_place, static_cast<std::uint8_t*>(da_->data()), static_cast<std::uint8_t*>(db_->data()),
                    device_);
  }
  return host_views(l, in_place);
}

Runner::Views Runner::host_views(const Layout& l, bool in_place) const {
  return views_on(l, in_place, a_.get(), b_.get(), Device::cpu());
}

Runner::Views Runner::views_on(const Layout& l, bool in_place, std::uint8_t* a, std::uint8_t* b, Device d) const {
  const DType t = o_.dtype;
  Views v;
  if (!in_place) {
    v.in = BufferView{a, l.in_count, t, d};
    v.out = BufferView{b, l.out_count, t, d};
    return v;
  }
  // In place, as torch and nccl-tests lay it out: the side of one count is
  // this rank's block of the side of one count per rank.
  std::uint8_t* own_block = b + static_cast<std::size_t>(rank_) * l.block_count * es_;
  const OpShape& s = op_shape(o_.collective);
  const bool in_is_block = s.in == BufferExtent::one && s.out == BufferExtent::per_rank;   // all_gather, gather
  const bool out_is_block = s.in == BufferExtent::per_rank && s.out == BufferExtent::one;  // scatter, reduce_scatter
  if (in_is_block || out_is_block) {
    v.in = BufferView{in_is_block ? own_block : b, l.in_count, t, d};
    v.out = BufferView{out_is_block ? own_block : b, l.out_count, t, d};
  } else {
    v.in = v.out = BufferView{b, l.in_count, t, d};
  }
  return v;
}

void Runner::issue(const Views& v, Exec e, std::vector<Work>& pending) {
  const OpShape& s = op_shape(o_.collective);
  if (!s.p2p) {
    // Every collective from its row (ProcessGroup::run): a new kind needs
    // no call here.
    pending.push_back(pg_.run(OpCall{.kind = o_.collective,
                                     .in = s.in == BufferExtent::none ? BufferView{} : v.in,
                                     .out = s.out == BufferExtent::none ? BufferView{} : v.out,
                                     .op = o_.op,
                                     .root = s.rooted ? o_.root : -1},
                              e));
    return;
  }
  // send and recv: a ring, send to the next rank, receive from the previous
  // one. Async calls progress side by side; blocking ones alternate by
  // parity so no two neighbours both wait in send.
  const int to = (rank_ + 1) % ranks_, from = (rank_ + ranks_ - 1) % ranks_;
  if (e == Exec::async || rank_ % 2 == 0) {
    pending.push_back(pg_.send(v.in, to, 0, e));
    pending.push_back(pg_.recv(v.out, from, 0, e));
  } else {
    pending.push_back(pg_.recv(v.out, from, 0, e));
    pending.push_back(pg_.send(v.in, to, 0, e));
  }
}

Runner::Timing Runner::time_batch(const Views& v, int warmup) {
  const Exec e = o_.blocking ? Exec::blocking : Exec::async;
  const std::size_t ops = static_cast<std::size_t>(o_.iters) * static_cast<std::size_t>(o_.agg_iters);
  std::vector<Work> pending;
  pending.reserve(std::max(ops, static_cast<std::size_t>(warmup)) * 2);
  auto drain = [&] {
    for (const Work& w : pending) w.wait();
    pending.clear();
  };
  for (int i = 0; i < warmup; ++i) issue(v, e, pending);
  drain();
  // Start together, so no rank's clock includes waiting for a late peer.
  pg_.barrier();
  // CUDA events on the group's stream for device memory (NCCL returns
  // before the GPU is done), a steady clock for host memory.
  std::chrono::steady_clock::duration issuing{};
  const double ms = time_ms(pg_, device_, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    if (e == Exec::blocking && !da_) {
      // Host memory, blocking: each call is done when it returns. Holding
      // its Work would make every call allocate a fresh state (the group
      // reuses one when the caller has let go, as a training loop does),
      // and the benchmark would time malloc and page faults.
      for (std::size_t i = 0; i < ops; ++i) {
        issue(v, e, pending);
        pending.clear();
      }
    } else {
      for (std::size_t i = 0; i < ops; ++i) issue(v, e, pending);
    }
    issuing = std::chrono::steady_clock::now() - t0;
    drain();
  });
  const double n = static_cast<double>(ops);
  return {ms / 1e3 / n, std::chrono::duration<double>(issuing).count() / n};
}

double Runner::time_barriers() {
  pg_.barrier();
  const double ms = time_ms(pg_, Device::cpu(), [&] {
    for (int i = 0; i < kBarrierRefIters; ++i) pg_.barrier();
  });
  return ms / 1e3 / kBarrierRefIters;
}

void Runner::prepare(const Layout& l, const Views& v, int round) {
  const DType t = o_.dtype;
  const int r = rank_, n = ranks_;
  const std::size_t p = l.block_count;
  const bool narrow = narrow_;
  // Outputs first: in-place inputs live inside them (all_gather's input is
  // the rank's block of the output).
  const bool same_buffer = v.out.data == v.in.data && v.out.count == v.in.count;
  if (!same_buffer) fill_sentinel(v.out.data, v.out.bytes());
  auto fill_in = [&](std::size_t offset_elems, std::size_t count, int key) {
    fill_values(t, static_cast<std::uint8_t*>(v.in.data) + offset_elems * es_, count,
                [&](std::size_t i) { return input_value(t, key, round, i, narrow); });
  };
  switch (o_.collective) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
    case OpKind::reduce:
    case OpKind::all_gather:
    case OpKind::gather:
    case OpKind::send:
    case OpKind::recv:
    case OpKind::reduce_scatter:
      // reduce_scatter: element g of the whole input is input_value(r, g).
      fill_in(0, v.in.count, r);
      break;
    case OpKind::scatter:
      // Block q of the root's input is meant for rank q. Elsewhere the input
      // is unused, and filling it would write the expected values into an
      // in-place output before the collective runs.
      if (r == o_.root) {
        for (int q = 0; q < n; ++q) fill_in(q * p, p, 1000 + q);
      }
      break;
    case OpKind::all_to_all:
      // Block j of rank r's input goes from r to j.
      for (int j = 0; j < n; ++j) fill_in(j * p, p, r * 100 + j);
      break;
    case OpKind::barrier: break;
  }
}

std::uint64_t Runner::verify(const Layout& l, const Views& v, int round) const {
  const DType t = o_.dtype;
  const int r = rank_, n = ranks_, root = o_.root;
  const std::size_t p = l.block_count;
  const ReduceOp op = o_.op;
  const bool narrow = narrow_;
  const auto* out = static_cast<const std::uint8_t*>(v.out.data);
  auto expect = [&](const std::uint8_t* at, std::size_t count, const ValueFn& f) {
    return count_wrong(t, at, count, f);
  };
  auto input_of = [&](int key) { return [=](std::size_t i) { return input_value(t, key, round, i, narrow); }; };
  auto reduced_from = [&](std::size_t first) {
    return [=](std::size_t i) { return reduced_value(t, op, n, round, first + i, narrow); };
  };
  std::uint64_t wrong = 0;
  switch (o_.collective) {
    case OpKind::all_reduce: wrong = expect(out, l.out_count, reduced_from(0)); break;
    case OpKind::broadcast: wrong = expect(out, l.out_count, input_of(root)); break;
    case OpKind::reduce:
      if (r == root) {
        wrong = expect(out, l.out_count, reduced_from(0));
      } else if (v.in.data == v.out.data) {
        // mci leaves a non-root's buffer untouched.
        wrong = expect(out, l.out_count, input_of(r));
      }
      break;
    case OpKind::gather:
      if (r != root) break;
      [[fallthrough]];
    case OpKind::all_gather:
      for (int q = 0; q < n; ++q) wrong += expect(out + q * p * es_, p, input_of(q));
      break;
    case OpKind::scatter: wrong = expect(out, p, input_of(1000 + r)); break;
    case OpKind::reduce_scatter: wrong = expect(out, p, reduced_from(static_cast<std::size_t>(r) * p)); break;
    case OpKind::all_to_all:
      for (int q = 0; q < n; ++q) wrong += expect(out + q * p * es_, p, input_of(q * 100 + r));
      break;
    case OpKind::send:
    case OpKind::recv: wrong = expect(out, l.out_count, input_of((r + n - 1) % n)); break;
    case OpKind::barrier: break;
  }
  return wrong;
}

std::uint64_t Runner::checked_call(const Layout& l, bool in_place, int round) {
  const Views v = views(l, in_place);
  const Views h = host_views(l, in_place);
  prepare(l, h, round);
  if (da_) {  // device runs: the host mirrors go over and come back
    da_->copy_from_host(a_.get(), a_.bytes);
    db_->copy_from_host(b_.get(), b_.bytes);
  }
  std::vector<Work> pending;
  issue(v, o_.blocking ? Exec::blocking : Exec::async, pending);
  for (const Work& w : pending) w.wait();
  return verify_result(l, in_place, round);
}

std::uint64_t Runner::verify_result(const Layout& l, bool in_place, int round) {
  if (da_) db_->copy_to_host(b_.get(), b_.bytes);
  return verify(l, host_views(l, in_place), round);
}

std::uint64_t Runner::check(const Layout& l, bool in_place, int round_base) {
  std::uint64_t wrong = 0;
  // Each round has its own data, so a stale output from an earlier
  // iteration cannot pass.
  for (int k = 0; k < o_.check; ++k) wrong += checked_call(l, in_place, round_base + k);
  return wrong;
}

void Runner::combine_times(std::vector<double>& values) {
  BufferView view{values.data(), values.size(), DType::f64};
  switch (o_.average) {
    case Average::rank0: host_broadcast(pg_, view, 0); break;
    case Average::mean: host_all_reduce(pg_, view, ReduceOp::avg); break;
    case Average::min: host_all_reduce(pg_, view, ReduceOp::min); break;
    case Average::max: host_all_reduce(pg_, view, ReduceOp::max); break;
  }
}

Row Runner::run(std::size_t index) {
  const std::size_t size = sizes_.at(index);
  const Layout l = layout_for(o_.collective, size / es_, es_, ranks_);
  Row row;
  row.bytes = l.bytes;
  row.count = size / es_;
  row.dtype = o_.dtype;
  row.op = o_.op;

  const bool with_in_place = has_in_place(o_.collective);
  // [out-of-place, in-place, barrier, out-of-place issue, in-place issue]
  // seconds on this rank.
  std::vector<double> times(5, 0.0);
  std::vector<std::int64_t> wrong(2, 0);
  const int round_base = static_cast<int>(index) * 4 * std::max(o_.check, 1);
  auto timed = [&](int k, bool in_place) {
    // Checking: the size's first call is a warm-up whose result is checked
    // (the sweep's first is the job's first call, where buffers, sockets
    // and segments are used for the first time), and so is what the timed
    // calls wrote out of place: they run on that call's data, and each
    // writes the whole output, so the last one's is there to read.
    const int first_round = kWarmupRounds + static_cast<int>(index) * 2 + k;
    int warmup = o_.warmup;
    if (o_.check > 0) {
      wrong[static_cast<std::size_t>(k)] += static_cast<std::int64_t>(checked_call(l, in_place, first_round));
      warmup = std::max(0, warmup - 1);
    }
    const Timing t = time_batch(views(l, in_place), warmup);
    times[static_cast<std::size_t>(k)] = t.seconds;
    times[static_cast<std::size_t>(k) + 3] = t.issue_seconds;
    if (o_.check > 0 && !in_place) {
      wrong[static_cast<std::size_t>(k)] += static_cast<std::int64_t>(verify_result(l, in_place, first_round));
    }
  };
  timed(0, false);
  if (o_.check > 0) wrong[0] += static_cast<std::int64_t>(check(l, false, round_base));
  if (with_in_place) {
    timed(1, true);
    if (o_.check > 0) wrong[1] += static_cast<std::int64_t>(check(l, true, round_base + 2 * o_.check));
  }
  if (o_.barrier_ref) times[2] = time_barriers();

  combine_times(times);
  host_all_reduce(pg_, BufferView{wrong.data(), wrong.size(), DType::i64}, ReduceOp::sum);

  auto cell = [&](int k) {
    Cell c;
    c.time_us = times[k] * 1e6;
    c.cpu_time_us = times[k + 3] * 1e6;
    c.bw = bandwidth(o_.collective, ranks_, l.bytes, times[k]);
    if (o_.check > 0) c.wrong = static_cast<std::uint64_t>(wrong[k]);
    return c;
  };
  row.out_of_place = cell(0);
  if (with_in_place) row.in_place = cell(1);
  if (o_.barrier_ref) row.barrier_us = times[2] * 1e6;
  return row;
}

}  // namespace mci::perf
