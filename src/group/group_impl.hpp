// The ProcessGroup front end: one submit() path for every call (NCCL's
// enqueue idea). It validates, numbers collectives, chooses where the call
// runs (caller's thread, or the progress thread for async calls) and turns
// the first failure into an abort that peers hear about at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "backends/backend.hpp"
#include "collectives/desc.hpp"
#include "diag/flight_recorder.hpp"
#include "diag/hang_report.hpp"
#include "group/work_state.hpp"
#include "mci/process_group.hpp"
#include "mci/store.hpp"

namespace mci {

struct ProcessGroup::Impl {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string backend_name;
  std::chrono::milliseconds timeout{};
  // Declared in this order so the backend closes before the store client,
  // and the store client before the server this rank may host.
  std::unique_ptr<StoreServer> hosted_store;
  std::shared_ptr<Store> store;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<diag::FlightRecorder> recorder;
  std::unique_ptr<diag::HangResponder> responder;  // reads recorder: declared after it
  std::chrono::milliseconds report_wait{3000};
  bool debug_timing = false;  // MCI_DEBUG=timing: a line per collective, a summary at the end

  Work submit(OpKind kind, const BufferView& in, const BufferView& out, ReduceOp op, int root,
              int tag, Exec e);
  void abort(const std::string& reason);
  void shutdown();
  ~Impl();

 private:
  struct Task {
    coll::CollectiveDesc d;
    diag::OpRecord rec;  // its flight recorder entry
    std::shared_ptr<Work::State> st;
  };
  // `shared`: the Work already exists for another thread (async calls), so
  // completing it takes its lock.
  void execute(const coll::CollectiveDesc& d, diag::OpRecord& rec, Work::State& st, Clock::time_point t0,
               bool shared);
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
  std::string hang_report(const diag::OpRecord& rec, std::chrono::milliseconds waited);
  void drain();
  void worker_loop();
  void fail_group(const std::string& reason);

  std::uint64_t seq_ = 0;
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

 public:
  std::uint64_t last_seq() const { return seq_; }
};

}  // namespace mci
