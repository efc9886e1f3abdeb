// The c10d Work of an mci operation, and the thread that completes the
// async ones.
//
// wait() returns only once the operation succeeded and its outputs are
// written (a non-contiguous output copied back); otherwise it rethrows
// mci's own error (TimeoutError with the hang report, MismatchError,
// PeerError), which the module's translator raises in Python as the
// mci_torch exception of the same name. getFuture() completes with the
// output tensors or with that error, so torch's C++ callers (DDP's
// reducer, comm hooks) see the failure too.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "mci/work.hpp"

namespace mci_torch {

// The failures of async operations whose Work nobody looked at (wait,
// getFuture, exception): the group's next call raises the first one, since
// its output was never written.
class UnseenFailures {
 public:
  void add(std::weak_ptr<void> token, const std::string& what, std::exception_ptr e);
  // Throws the first failure nobody has seen yet (once).
  void throw_first();

 private:
  struct Entry {
    std::weak_ptr<void> seen_flag;
    std::string what;
    std::exception_ptr error;
  };
  std::mutex mu_;
  std::deque<Entry> entries_;
};

class WorkMCI final : public c10d::Work {
 public:
  // finish runs once the operation succeeded (the copies back into the
  // caller's tensors); keep holds the buffers mci reads and writes.
  WorkMCI(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs, std::function<void()> finish,
          std::vector<at::Tensor> keep);

  // The operation is mci's `work`; waits for it, then completes this Work.
  // Called once: by the completer thread, or by the caller of a blocking op.
  void complete(const mci::Work& work, const std::shared_ptr<UnseenFailures>& unseen);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;
  // A receive's sender (recv from any source: the rank that matched).
  int sourceRank() const override;

 private:
  void touch() const;

  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::function<void()> finish_;
  std::vector<at::Tensor> keep_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // Alive while nobody looked at this Work; UnseenFailures holds a weak one.
  mutable std::shared_ptr<void> unseen_flag_ = std::make_shared<int>(0);
  mutable std::mutex touch_mu_;
  float duration_ms_ = 0;
  int source_ = -1;
};

// The threads completing a group's async operations. One takes them in
// the order they were queued (the order mci runs them in); completing a
// Work runs its future's callbacks on that thread, and a callback may start
// an operation and wait for it (torch's powerSGD_hook does), which that
// thread would then never complete. So while a thread runs callbacks and
// more operations are queued than threads are idle, another thread starts
// (gloo's completions run on a pool too), up to kMaxThreads.
class Completer {
 public:
  static constexpr std::size_t kMaxThreads = 8;

  explicit Completer(std::shared_ptr<UnseenFailures> unseen);
  ~Completer();  // completes what is queued, then ends the threads
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void push(c10::intrusive_ptr<WorkMCI> w, mci::Work work);
  // Whether an operation is queued or being completed.
  bool pending();

 private:
  void run();
  // Under mu_: a thread more when callbacks may be waiting on queued work.
  void add_thread_if_needed();

  std::shared_ptr<UnseenFailures> unseen_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<c10::intrusive_ptr<WorkMCI>, mci::Work>> queue_;
  bool stop_ = false;
  std::size_t busy_ = 0;          // threads completing one (outside the queue)
  std::size_t idle_ = 0;          // threads waiting for the queue
  std::size_t in_callbacks_ = 0;  // threads whose operation is done: running its callbacks
  std::vector<std::thread> threads_;
};

}  // namespace mci_torch
