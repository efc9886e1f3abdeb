// The ProcessGroup front end: one submit() path for every call (NCCL's
// enqueue idea). It validates, numbers collectives, chooses where the call
// runs (caller's thread, or the progress thread for async calls) and turns
// the first failure into an abort that peers hear about at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "backends/backend.hpp"
#include "collectives/desc.hpp"
#include "diag/dump_registry.hpp"
#include "diag/flight_recorder.hpp"
#include "diag/hang_report.hpp"
#include "group/join.hpp"
#include "group/settings.hpp"
#include "group/tick_clock.hpp"
#include "group/validate.hpp"
#include "group/work_state.hpp"
#include "mci/process_group.hpp"
#include "mci/store.hpp"

namespace mci {

struct BackendEntry;  // backends/registry.hpp

// Who this rank is in the group: fixed for the group's life.
struct GroupIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string backend_name;
  std::chrono::milliseconds timeout{};
};

// The group's keys in the store.
struct GroupSession {
  std::string prefix;      // every key of this group is under it
  bool certified = false;  // the store writes a death certificate for each rank (shrink() needs them)
};

struct ProcessGroup::Impl {
  // `origin` keeps the job's store (and the server this rank may host);
  // `store` is the group's, prefixed with session.prefix.
  Impl(const GroupIdentity& id, const Settings& settings, GroupOrigin origin, GroupSession session,
       std::shared_ptr<Store> store, std::unique_ptr<Backend> backend, std::unique_ptr<TickClock> clock);
  ~Impl();

  const int rank;
  const int size;
  const int local_rank;
  const int local_size;
  const std::string backend_name;
  // Every operation's timeout: the init's, until set_timeout changes it
  // (for the operations issued after; torch's Backend::setTimeout).
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  void set_timeout(std::chrono::milliseconds t);

  Work submit(const Call& call, Exec e);
  void abort(const std::string& reason);
  void shutdown();
  std::uint64_t last_seq() const { return seq_; }
  void* cuda_stream() const { return backend_->cuda_stream(); }
  Shrunk shrink(const std::vector<int>& exclude);  // group/shrink.cpp
  bool joiners_waiting();                          // group/grow.cpp
  Grown grow();
  // The flight recorder in torch's format (group/fr_dump.cpp).
  void register_for_dumps(const FrDumpPlace& place, const std::string& name);
  std::string dump_flight_recorder(const std::string& prefix) const;
  void name_for_dumps(const std::string& name, const std::string& desc, const std::vector<int>& job_ranks);

 private:
  // Declared in this order so the backend closes before the store client,
  // and the store client before the server this rank may host.
  const GroupOrigin origin_;
  const GroupSession session_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Backend> backend_;
  const BackendEntry& backend_row_;  // its row of the backend table: the kinds it runs
  std::unique_ptr<diag::FlightRecorder> recorder_;
  std::unique_ptr<diag::HangResponder> responder_;  // reads recorder_: declared after it
  const std::chrono::milliseconds report_wait_;
  const bool debug_timing_;  // MCI_DEBUG=timing: a line per collective, a summary at the end
  // The submit and finish times of every call (MCI_CLOCK).
  std::unique_ptr<TickClock> clock_;
  std::unique_ptr<diag::DumpRegistration> dump_;  // reads recorder_: declared after it
  std::string dump_after(std::string_view why);   // the report's last line, or ""

  struct Task {
    coll::CollectiveDesc d;
    diag::OpRecord rec;  // its flight recorder entry
    std::shared_ptr<Work::State> st;
  };
  // Who runs an operation decides how: the caller's thread (blocking calls)
  // runs the backend's run() and completes a Work nobody else sees yet; the
  // progress thread (async calls) runs run_async(), which may hand the Work a
  // device fence early, and completes a Work other threads may be waiting on
  // (under its lock).
  enum class Runner { caller, progress_thread };
  void execute(const coll::CollectiveDesc& d, diag::OpRecord& rec, Work::State& st, Clock::time_point t0,
               Runner runner);
  // An abort() still to carry out (process_group.cpp), under exec_mu_.
  void take_abort();
  // The error for an operation submitted after the group broke.
  [[noreturn]] void throw_broken(const coll::CollectiveDesc& d) const;
  void run_p2p_batch(std::deque<Task> batch);
  void take_queued_p2p(std::deque<Task>& into);
  void record_failure(const coll::CollectiveDesc& d, const std::exception& err);
  void note_timing(const coll::CollectiveDesc& d, std::chrono::nanoseconds took,
                   const std::optional<Backend::Lateness>& late);
  void print_timing_summary();

  struct Straggler {
    std::uint64_t times = 0;
    std::int64_t total_late_ns = 0;
  };
  std::vector<Straggler> stragglers_;  // guarded by exec_mu_
  std::uint64_t timed_ops_ = 0;
  std::int64_t timed_ns_ = 0;
  diag::HangReport hang_report(const diag::OpRecord& rec, std::chrono::milliseconds waited,
                               const diag::ReportCause& cause = diag::kTimedOut);
  // ", the odd one out: rank R ..." for an error's first line, or "".
  static std::string odd_ones_text(const diag::HangReport& report);
  void drain();
  void worker_loop();
  void fail_group(const std::string& reason);

  std::uint64_t seq_ = 0;
  std::atomic<std::chrono::milliseconds::rep> timeout_ms_;
  std::shared_ptr<Work::State> spare_state_;  // reused by blocking calls
  // Set once the progress thread exists; until then blocking calls skip the
  // queue entirely (no lock on the fast path).
  std::atomic<bool> async_used_{false};
  // Async engine: tasks run in submission order on one progress thread,
  // started on the first async call.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
  // Held by whoever runs an operation (caller or progress thread).
  std::mutex exec_mu_;
  std::string broken_;  // the first failure; guarded by exec_mu_
  // abort() was called: the progress thread's point-to-point loop, which
  // abort()'s drain would otherwise wait on until the timeout (a recv whose
  // send never comes), fails its operations at its next round.
  std::atomic<bool> abort_requested_{false};
  // Ranks a hang report found unable to answer (a process on this host
  // stopped or gone): shrink() leaves them out without waiting a whole
  // timeout for them again. Under mu_.
  std::set<int> suspects_;
  // Ranks that only did not answer in time (frozen, cut off, or slowed by
  // the store): shrink() waits for them a report's wait, not a whole
  // timeout, and keeps them if they come. Under mu_.
  std::set<int> unanswered_;
  std::string abort_reason_;  // guarded by mu_
};

}  // namespace mci
