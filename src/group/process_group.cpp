#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/registry.hpp"
#include "common/log.hpp"
#include "group/group_impl.hpp"
#include "group/validate.hpp"
#include "mci/errors.hpp"
#include "monitor/status_block.hpp"

namespace mci {

namespace {
std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Under mcirun --monitor the ring lives in the process's status block,
// where the launcher reads it; otherwise in the recorder's own memory.
std::unique_ptr<diag::FlightRecorder> make_recorder(const GroupIdentity& id, std::size_t entries,
                                                    const std::string& name) {
  if (auto* block = monitor::BlockWriter::of_process(); block != nullptr && entries > 0) {
    if (auto area = block->add_area(entries, id.rank, id.size, static_cast<std::uint64_t>(id.timeout.count()),
                                    id.backend_name, name)) {
      return std::make_unique<diag::FlightRecorder>(entries, *area);
    }
  }
  return std::make_unique<diag::FlightRecorder>(entries);
}
}  // namespace

Work ProcessGroup::Impl::submit(const Call& call, Exec e) {
  const OpKind kind = call.kind;
  coll::CollectiveDesc d;
  try {
    require_kind(backend_row_, kind);
    d = make_desc(call, rank, size);
    require_any_source(backend_name, d);
    if (!is_p2p(kind)) d.seq = seq_ + 1;
    backend_->prepare(d);  // may refuse, e.g. host memory on nccl
  } catch (const ConfigError& err) {
    // Peers may already be inside this collective: tell them now rather
    // than letting them wait for the timeout.
    fail_group(err.what());
    throw;
  }
  if (!is_p2p(kind)) ++seq_;
  // A recv from any source always runs where async point-to-point runs: the
  // backend posts it and the progress thread moves it beside the other
  // sends and receives until some rank's send matches (a run() to
  // completion would need the backend to match a sender on its own). A
  // blocking one waits for it there.
  const bool wait_here = e == Exec::blocking && d.from_any_source();
  if (wait_here) e = Exec::async;

  // Blocking calls reuse the last state when the caller has let go of its
  // Work (the usual case): no allocation on the fast path.
  std::shared_ptr<Work::State> st;
  if (e == Exec::blocking && spare_state_ && spare_state_.use_count() == 1) {
    st = spare_state_;
    st->reset();
  } else {
    st = std::make_shared<Work::State>();
    if (e == Exec::blocking) spare_state_ = st;
  }
  st->seq = d.seq;
  st->kind = kind;
  st->algo = d.algo;
  const auto submitted = clock_->now();
  if (e == Exec::blocking) {
    // Enqueued and started at once: one record write, one clock read.
    diag::OpRecord rec = recorder_->enqueue(d, ns_of(submitted), /*started=*/true);
    const bool queued_work = async_used_.load(std::memory_order_acquire);
    if (queued_work) drain();
    {
      std::lock_guard lk(exec_mu_);
      execute(d, rec, *st, queued_work ? clock_->now() : submitted, Runner::caller);
    }
    if (st->error) std::rethrow_exception(st->error);
    return Work(std::move(st));
  }
  diag::OpRecord rec = recorder_->enqueue(d, ns_of(submitted));
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw Error("mci: the process group is being destroyed; no new work is accepted");
    queue_.push_back(Task{d, rec, st});
    if (!worker_.joinable()) {
      async_used_.store(true, std::memory_order_release);
      worker_ = std::thread([this] { worker_loop(); });
    }
  }
  cv_.notify_all();
  Work w(std::move(st));
  if (wait_here) w.wait();  // rethrows its error, as a blocking call does
  return w;
}

void ProcessGroup::Impl::execute(const coll::CollectiveDesc& d, diag::OpRecord& rec, Work::State& st,
                                 Clock::time_point t0, Runner runner) {
  const bool shared = runner == Runner::progress_thread;
  if (rec.state != diag::OpState::started) recorder_->start(rec, ns_of(t0));
  backend_->note_entry(ns_of(t0));
  std::exception_ptr failure;
  Clock::duration took_until_failure{};
  try {
    take_abort();
    if (!broken_.empty()) throw_broken(d);
    try {
      if (shared) {
        backend_->run_async(d, Deadline(t0 + timeout(), timeout()),
                            [&st](std::shared_ptr<const DeviceFence> f) { st.publish_fence(std::move(f)); });
      } else {
        backend_->run(d, Deadline(t0 + timeout(), timeout()));
      }
    } catch (const TimeoutError& err) {
      // Before anything else moves: ask every rank what it is doing.
      const diag::HangReport report =
          hang_report(rec, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0));
      if (!report.mismatched.empty()) {
        // A backend without fingerprints on the wire (gloo) sees ranks that
        // called different collectives only as a timeout; the report saw them.
        std::string who;
        for (int r : report.mismatched) who += (who.empty() ? "" : ", ") + std::to_string(r);
        throw MismatchError(fmt::format(
            "collective mismatch: rank {} called {} but rank(s) {} called a different collective at the same "
            "position (found when the {}ms timeout expired: the {} backend cannot compare the ranks' calls "
            "sooner){}. Every rank must call the same collectives in the same order with the same count, dtype, "
            "op and root.\n{}\n{}",
            rank, d.fingerprint().describe(), who, timeout().count(), backend_->name(), odd_ones_text(report),
            err.what(), report.text));
      }
      throw TimeoutError(std::string(err.what()) + "\n" + report.text);
    } catch (const MismatchError& err) {
      // Seen at once on the wire (the engine compares the ranks' calls):
      // every rank is asked what it called, as after a timeout, so that the
      // error names the odd one out (two ranks' calls cannot say which is
      // wrong) and every rank writes its flight recorder where dumps go
      // (torchfrtrace finds every file, not an empty folder).
      const auto waited = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0); };
      diag::HangReport report = hang_report(rec, waited(), diag::kMismatchSeen);
      // A rank not at this position yet is most likely only slower (the
      // mismatch was seen at once, not after a timeout): asked again while
      // the report's wait lasts, so that its call counts (a slow third rank
      // left two ranks evenly split, and no odd one named: CI).
      const auto until = Clock::now() + std::min(report_wait_, timeout());
      while (report.odd_ones.empty() && !report.not_there.empty() && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        report = hang_report(rec, waited(), diag::kMismatchSeen);
      }
      throw MismatchError(fmt::format("{}{}\n{}", err.what(), odd_ones_text(report), report.text));
    }
    const auto end = clock_->now();
    // Device work timed with CUDA events (nccl) takes the device's time: the
    // host's window also holds the wait for work queued before it.
    const auto device_ns = backend_->last_device_ns();
    const auto took =
        device_ns ? std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(*device_ns)) : end - t0;
    const auto late = backend_->last_arrival();
    recorder_->finish(rec, true, ns_of(end), late ? late->rank : -1, late ? late->ns : 0, device_ns.value_or(0));
    if (debug_timing_) note_timing(d, took, late);
    const int src = d.kind == OpKind::recv ? d.peer : -1;
    if (shared) {
      st.finish(took, nullptr, src);
    } else {
      st.finish_unshared(took, nullptr, src);
    }
  } catch (const std::exception& err) {
    const auto end = Clock::now();
    recorder_->finish(rec, false, ns_of(end));
    record_failure(d, err);
    failure = std::current_exception();
    took_until_failure = end - t0;
  }
  // Published after the catch has ended, so this thread holds no reference
  // of its own (the handler's) once the waiter can see the error: the
  // exception is then freed by whoever drops the last exception_ptr, which
  // TSan sees as an _M_release (tests/tsan.supp says why that is suppressed).
  if (!failure) return;
  if (shared) {
    st.finish(took_until_failure, std::move(failure));
  } else {
    st.finish_unshared(took_until_failure, std::move(failure));
  }
}

// An abort() that could not close the connections at once (an operation
// was running, on a backend that cannot be interrupted) does it before the
// next operation. Under exec_mu_.
void ProcessGroup::Impl::take_abort() {
  if (!broken_.empty() || !abort_requested_.load(std::memory_order_acquire)) return;
  std::string why;
  {
    std::lock_guard lk(mu_);
    why = abort_reason_;
  }
  broken_ = why;
  backend_->abort(fmt::format("rank {}: {}", rank, why));
}

void ProcessGroup::Impl::throw_broken(const coll::CollectiveDesc& d) const {
  throw Error(
      fmt::format("mci: {} cannot run on rank {}: the group was aborted after an earlier error ({}). "
                  "Destroy the group and create a new one.",
                  d.describe(), rank, broken_));
}

void ProcessGroup::Impl::record_failure(const coll::CollectiveDesc& d, const std::exception& err) {
  if (!broken_.empty()) return;
  broken_ = err.what();
  backend_->abort(fmt::format("{} failed on rank {}: {}", d.describe(), rank, err.what()));
}

void ProcessGroup::Impl::note_timing(const coll::CollectiveDesc& d, std::chrono::nanoseconds took,
                                     const std::optional<Backend::Lateness>& late) {
  const double ms = std::chrono::duration<double, std::milli>(took).count();
  ++timed_ops_;
  timed_ns_ += took.count();
  std::string who =
      fmt::format("unknown (the {} backend does not report arrivals; the cpu backend does)", backend_->name());
  if (late) {
    if (stragglers_.size() != static_cast<std::size_t>(size)) stragglers_.resize(static_cast<std::size_t>(size));
    auto& s = stragglers_[static_cast<std::size_t>(late->rank)];
    ++s.times;
    s.total_late_ns += std::max<std::int64_t>(late->ns, 0);
    who = late->rank == rank
              ? fmt::format("rank {} (this rank)", rank)
              : fmt::format("rank {}, {:.3f} ms after rank {}", late->rank, static_cast<double>(late->ns) / 1e6, rank);
  }
  log::write(log::Level::info, fmt::format("timing: {} took {:.3f} ms on rank {}; last to arrive: {}",
                                           d.fingerprint().describe(), ms, rank, who));
}

void ProcessGroup::Impl::print_timing_summary() {
  if (!debug_timing_ || timed_ops_ == 0) return;
  std::string out = fmt::format("timing summary on rank {}: {} collectives, {:.3f} ms inside them", rank, timed_ops_,
                                static_cast<double>(timed_ns_) / 1e6);
  std::vector<int> order;
  for (int r = 0; r < static_cast<int>(stragglers_.size()); ++r) {
    if (stragglers_[r].times) order.push_back(r);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return stragglers_[a].times > stragglers_[b].times; });
  if (order.empty())
    out += fmt::format("; no arrival data (the {} backend does not report arrivals)", backend_->name());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& s = stragglers_[order[k]];
    out += fmt::format("{}rank {} arrived last {} times (mean {:.3f} ms after this rank)",
                       k == 0 ? "; last to arrive: " : ", ", order[k], s.times,
                       static_cast<double>(s.total_late_ns) / 1e6 / static_cast<double>(s.times));
  }
  log::write(log::Level::info, out);
}

void ProcessGroup::Impl::take_queued_p2p(std::deque<Task>& into) {
  std::lock_guard lk(mu_);
  while (!queue_.empty() && is_p2p(queue_.front().d.kind)) {
    into.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

// Async sends and receives that follow each other in the queue run
// together: each is posted at once and they progress side by side, so an
// isend and an irecv to the same peer complete whatever their sizes. A
// collective queued after them waits until they are all done.
void ProcessGroup::Impl::run_p2p_batch(std::deque<Task> batch) {
  std::lock_guard lk(exec_mu_);
  struct Live {
    Task t;
    std::uint64_t ticket;
    Clock::time_point t0;
  };
  std::vector<Live> live;
  auto post = [&](Task& t) {
    const auto t0 = Clock::now();
    std::exception_ptr failure;
    recorder_->start(t.rec, ns_of(t0));
    try {
      take_abort();
      if (!broken_.empty()) throw_broken(t.d);
      live.push_back(Live{t, backend_->post_p2p(t.d, Deadline(timeout())), t0});
    } catch (const std::exception& err) {
      recorder_->finish(t.rec, false, diag::now_ns());
      record_failure(t.d, err);
      failure = std::current_exception();
    }
    if (failure) t.st->finish(Clock::now() - t0, std::move(failure));  // after the catch: see execute()
  };
  while (true) {
    for (auto& t : batch) post(t);
    batch.clear();
    for (auto it = live.begin(); it != live.end();) {
      if (backend_->p2p_done(it->ticket)) {
        const coll::CollectiveDesc& d = it->t.d;
        const int src = d.from_any_source() ? backend_->p2p_source(it->ticket) : d.kind == OpKind::recv ? d.peer : -1;
        recorder_->finish(it->t.rec, true, diag::now_ns());
        it->t.st->finish(Clock::now() - it->t0, nullptr, src);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    take_queued_p2p(batch);
    if (live.empty() && batch.empty()) return;
    if (live.empty()) continue;
    if (abort_requested_.load(std::memory_order_acquire)) {
      std::string why;
      {
        std::lock_guard q(mu_);
        why = abort_reason_;
      }
      const Error err(fmt::format("mci: {} on rank {} was {}", live.front().t.rec.describe(), rank, why));
      record_failure(live.front().t.d, err);
      for (auto& l : live) {
        recorder_->finish(l.t.rec, false, diag::now_ns());
        l.t.st->finish(Clock::now() - l.t0, std::make_exception_ptr(err));
      }
      live.clear();
      continue;
    }
    std::exception_ptr e;
    try {
      // Short rounds, so a send or recv queued meanwhile joins the batch.
      backend_->progress_p2p(std::chrono::milliseconds(1), Deadline(live.front().t0 + timeout(), timeout()));
    } catch (const std::exception& err) {
      e = std::current_exception();
      if (dynamic_cast<const TimeoutError*>(&err)) {
        e = std::make_exception_ptr(TimeoutError(
            std::string(err.what()) + "\n" +
            hang_report(live.front().t.rec,
                        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - live.front().t0))
                .text));
      }
      record_failure(live.front().t.d, err);
    }
    if (e) {  // after the catch: see execute()
      for (auto& l : live) {
        recorder_->finish(l.t.rec, false, diag::now_ns());
        l.t.st->finish(Clock::now() - l.t0, e);
      }
      live.clear();
      e = nullptr;
    }
  }
}

diag::HangReport ProcessGroup::Impl::hang_report(const diag::OpRecord& rec, std::chrono::milliseconds waited,
                                                 const diag::ReportCause& cause) {
  diag::HangReport report;
  if (store_ && report_wait_.count() > 0) {
    try {
      report = diag::collect_hang_report(*store_, rank, size, rec, waited, std::min(report_wait_, timeout()), cause);
    } catch (const std::exception& e) {
      report = {fmt::format("(no hang report: {})", e.what()), {}, {}, {}, {}, {}};
    }
  }
  {
    std::lock_guard lk(mu_);
    suspects_.insert(report.cannot_answer.begin(), report.cannot_answer.end());
    for (int r : report.silent) {
      if (!suspects_.count(r)) unanswered_.insert(r);
    }
  }
  // With the operation still shown as running, as the other ranks' dumps
  // (written when the report asked them) show it.
  report.text += dump_after(cause.event);
  return report;
}

std::string ProcessGroup::Impl::odd_ones_text(const diag::HangReport& report) {
  if (report.odd_ones.empty()) return {};
  return fmt::format(" (the odd one{} out: rank{} {}, as every other rank's answer to the report below says)",
                     report.odd_ones.size() > 1 ? "s" : "", report.odd_ones.size() > 1 ? "s" : "",
                     fmt::join(report.odd_ones, ", "));
}

void ProcessGroup::Impl::fail_group(const std::string& reason) {
  drain();
  std::lock_guard lk(exec_mu_);
  if (broken_.empty()) {
    broken_ = reason;
    backend_->abort(fmt::format("rank {}: {}", rank, reason));
  }
}

void ProcessGroup::Impl::drain() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void ProcessGroup::Impl::worker_loop() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    if (is_p2p(task.d.kind)) {
      std::deque<Task> batch;
      batch.push_back(std::move(task));
      while (!queue_.empty() && is_p2p(queue_.front().d.kind)) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lk.unlock();
      run_p2p_batch(std::move(batch));
    } else {
      lk.unlock();
      std::lock_guard ex(exec_mu_);
      execute(task.d, task.rec, *task.st, clock_->now(), Runner::progress_thread);
    }
    lk.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void ProcessGroup::Impl::abort(const std::string& reason) {
  const std::string why = "aborted by the user: " + reason;
  {
    std::lock_guard lk(mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
  }
  abort_requested_.store(true, std::memory_order_release);
  // An operation running on another thread (a blocking call, the progress
  // thread) fails within milliseconds with this text, and its failure
  // closes the connections with it (record_failure): abort() does not wait
  // for it, nor for its timeout. Queued operations then fail as the group
  // is broken.
  backend_->interrupt(fmt::format("the group was aborted on rank {}: {}", rank, why));
  cv_.notify_all();
  // Nothing running: the connections close now, so that the peers hear it
  // at once rather than at their next operation.
  std::unique_lock ex(exec_mu_, std::try_to_lock);
  if (ex.owns_lock() && broken_.empty()) {
    broken_ = why;
    backend_->abort(fmt::format("rank {}: {}", rank, why));
  }
}

void ProcessGroup::Impl::set_timeout(std::chrono::milliseconds t) {
  if (t.count() <= 0) {
    throw ConfigError(fmt::format("set_timeout({} ms) on rank {}: give a positive timeout", t.count(), rank));
  }
  timeout_ms_.store(t.count());
}

void ProcessGroup::Impl::shutdown() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  responder_.reset();
  recorder_->close();
  std::lock_guard lk(exec_mu_);
  print_timing_summary();
  if (broken_.empty()) backend_->close();
}

ProcessGroup::Impl::Impl(const GroupIdentity& id, const Settings& settings, GroupOrigin origin, GroupSession session,
                         std::shared_ptr<Store> store, std::unique_ptr<Backend> backend,
                         std::unique_ptr<TickClock> clock)
    : rank(id.rank),
      size(id.size),
      local_rank(id.local_rank),
      local_size(id.local_size),
      backend_name(id.backend_name),
      origin_(std::move(origin)),
      session_(std::move(session)),
      store_(std::move(store)),
      backend_(std::move(backend)),
      backend_row_(require_backend(id.backend_name)),
      recorder_(make_recorder(id, static_cast<std::size_t>(settings.integer("MCI_FLIGHT_RECORDER_ENTRIES")),
                              origin_.opts.group_name)),
      report_wait_(settings.integer("MCI_HANG_REPORT_WAIT_MS")),
      debug_timing_(settings.text("MCI_DEBUG").find("timing") != std::string::npos),
      clock_(std::move(clock)) {
  timeout_ms_.store(id.timeout.count());
  clock_->settle();
  if (auto own = store_->clone()) responder_ = std::make_unique<diag::HangResponder>(std::move(own), rank, *recorder_);
}

ProcessGroup::Impl::~Impl() {
  if (backend_) shutdown();
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
int ProcessGroup::local_rank() const { return impl_->local_rank; }
int ProcessGroup::local_size() const { return impl_->local_size; }
const std::string& ProcessGroup::backend() const { return impl_->backend_name; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout(); }
void ProcessGroup::set_timeout(std::chrono::milliseconds t) { impl_->set_timeout(t); }
std::uint64_t ProcessGroup::last_seq() const { return impl_->last_seq(); }
void ProcessGroup::abort(const std::string& reason) { impl_->abort(reason); }
ProcessGroup::Shrunk ProcessGroup::shrink(const std::vector<int>& exclude) { return impl_->shrink(exclude); }
bool ProcessGroup::joiners_waiting() { return impl_->joiners_waiting(); }
ProcessGroup::Grown ProcessGroup::grow() { return impl_->grow(); }

Work ProcessGroup::all_reduce(BufferView data, ReduceOp op, Exec e) {
  return impl_->submit(Call{.kind = OpKind::all_reduce, .in = data, .out = data, .op = op}, e);
}
Work ProcessGroup::all_reduce(BufferView in, BufferView out, ReduceOp op, Exec e) {
  return impl_->submit(Call{.kind = OpKind::all_reduce, .in = in, .out = out, .op = op}, e);
}
Work ProcessGroup::broadcast(BufferView data, int root, Exec e) {
  return impl_->submit(Call{.kind = OpKind::broadcast, .in = data, .out = data, .root = root}, e);
}
Work ProcessGroup::broadcast(BufferView in, BufferView out, int root, Exec e) {
  return impl_->submit(Call{.kind = OpKind::broadcast, .in = in, .out = out, .root = root}, e);
}
Work ProcessGroup::reduce(BufferView data, int root, ReduceOp op, Exec e) {
  return impl_->submit(Call{.kind = OpKind::reduce, .in = data, .out = data, .op = op, .root = root}, e);
}
Work ProcessGroup::reduce(BufferView in, BufferView out, int root, ReduceOp op, Exec e) {
  return impl_->submit(Call{.kind = OpKind::reduce, .in = in, .out = out, .op = op, .root = root}, e);
}
Work ProcessGroup::all_gather(BufferView in, BufferView out, Exec e) {
  return impl_->submit(Call{.kind = OpKind::all_gather, .in = in, .out = out}, e);
}
Work ProcessGroup::gather(BufferView in, BufferView out, int root, Exec e) {
  return impl_->submit(Call{.kind = OpKind::gather, .in = in, .out = out, .root = root}, e);
}
Work ProcessGroup::scatter(BufferView in, BufferView out, int root, Exec e) {
  return impl_->submit(Call{.kind = OpKind::scatter, .in = in, .out = out, .root = root}, e);
}
Work ProcessGroup::reduce_scatter(BufferView in, BufferView out, ReduceOp op, Exec e) {
  return impl_->submit(Call{.kind = OpKind::reduce_scatter, .in = in, .out = out, .op = op}, e);
}
Work ProcessGroup::all_to_all(BufferView in, BufferView out, Exec e) {
  return impl_->submit(Call{.kind = OpKind::all_to_all, .in = in, .out = out}, e);
}
Work ProcessGroup::barrier(Exec e) { return impl_->submit(Call{.kind = OpKind::barrier}, e); }
Work ProcessGroup::run(const OpCall& call, Exec e) { return impl_->submit(call, e); }
Work ProcessGroup::send(BufferView data, int dst, int tag, Exec e) {
  return impl_->submit(Call{.kind = OpKind::send, .in = data, .peer = dst, .tag = tag}, e);
}
Work ProcessGroup::recv(BufferView data, int src, int tag, Exec e) {
  return impl_->submit(Call{.kind = OpKind::recv, .out = data, .peer = src, .tag = tag}, e);
}

}  // namespace mci
