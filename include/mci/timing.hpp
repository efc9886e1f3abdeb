// Timing a collective with the clock that fits where its data lives. Host
// memory: the call blocks until the result is written, so a steady clock
// around it is the duration. Device memory: the call returns once the work is
// queued on the GPU, so the time comes from CUDA events recorded on the
// group's stream around it, after waiting for the end event.
#pragma once

#include <utility>

#include "mci/process_group.hpp"
#include "mci/types.hpp"

namespace mci {

class CollectiveTimer {
 public:
  // For device memory this needs a build with CUDA and a visible GPU
  // (ConfigError otherwise).
  CollectiveTimer(ProcessGroup& pg, Device where);
  ~CollectiveTimer();
  CollectiveTimer(const CollectiveTimer&) = delete;
  CollectiveTimer& operator=(const CollectiveTimer&) = delete;

  void start();
  // Milliseconds since start(); for device memory, waits for the GPU first.
  double stop_ms();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

template <class F>
double time_ms(ProcessGroup& pg, Device where, F&& body) {
  CollectiveTimer t(pg, where);
  t.start();
  std::forward<F>(body)();
  return t.stop_ms();
}

// Number of CUDA devices this process can see (0 without CUDA in the build).
int visible_gpu_count();

}  // namespace mci
