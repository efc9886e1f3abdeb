// The shared state behind a Work handle.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "common/algo.hpp"
#include "common/device_fence.hpp"
#include "common/op_kind.hpp"
#include "mci/work.hpp"

namespace mci {

struct Work::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::chrono::nanoseconds duration{0};
  std::uint64_t seq = 0;
  OpKind kind = OpKind::barrier;
  Algo algo = Algo::unset;
  // A recv's rank of origin, set when it succeeds (Work::source()).
  int source = -1;
  // Set once a device backend has put the operation on the device queue.
  std::shared_ptr<const DeviceFence> fence;

  void publish_fence(std::shared_ptr<const DeviceFence> f) {
    {
      std::lock_guard lk(mu);
      fence = std::move(f);
    }
    cv.notify_all();
  }

  // Only for a state nobody else holds (see ProcessGroup::Impl::submit).
  void reset() {
    done = false;
    error = nullptr;
    duration = std::chrono::nanoseconds(0);
    source = -1;
    fence = nullptr;
  }

  // For a state no other thread can see yet (a blocking call's).
  // `src`: a recv's rank of origin (kept on success only).
  void finish_unshared(std::chrono::nanoseconds d, std::exception_ptr e, int src = -1) {
    duration = d;
    source = e ? -1 : src;
    error = std::move(e);
    done = true;
  }

  void finish(std::chrono::nanoseconds d, std::exception_ptr e, int src = -1) {
    {
      std::lock_guard lk(mu);
      duration = d;
      source = e ? -1 : src;
      error = std::move(e);
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace mci
