// Keeps a host's spinning ranks on different CPUs.
//
// Ranks that wait for each other by spinning need a CPU each. The kernel
// sometimes stacks two of them on one CPU (a futex wake-up places the woken
// rank on its waker's CPU when the other CPU is busy for a moment) and then
// leaves them there: each op costs a context switch, ~20 us instead of
// 0.3 us, for the rest of the run (measured: 3 runs in 12 of a 4 KiB
// all-reduce, both ranks on CPU 0 while CPU 1 idled). A waiting rank that
// finds the rank it waits for on its own CPU moves itself to an allowed CPU
// no rank of its host was last seen on, then gives its affinity mask back,
// so the kernel stays free to place it and a mask set by the user or the
// launcher (mcirun --bind, srun --cpu-bind) is kept. Where it cannot move
// (it moved less than kRetry ago, or no CPU is free), the wait stops
// spinning and sleeps: the rank it waits for is queued behind it there, and
// its wake-up places the sleeper on a free CPU if there is one. Under CPU
// steal the kernel stacks ranks far more often (a CPU that loses time to
// another guest, or to a higher-priority thread, counts as busy and its
// ranks are pulled away) and may undo a move within a millisecond; while
// the wait kept spinning, each rank spun out its time slice while the other
// waited: a run of 64 KiB all_gather at 1151 us per call where 4 us is the
// norm (perf sched: both ranks on CPU 0, preempting each other every ~1 ms).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mci::transport {

class ShmSegment;

class CpuSpread {
 public:
  enum class Placement {
    apart,    // `awaited` was last seen on another CPU (or nowhere yet)
    moved,    // it was on ours: this thread moved to a CPU of its own
    stacked,  // it is on ours and this thread could not move: stop spinning
  };
  // Records this thread's CPU for `rank`; if `awaited` was last seen on the
  // same CPU, moves this thread (at most once per kRetry).
  Placement check(const ShmSegment& seg, int rank, int size, int awaited);
  // Records this thread's CPU for `rank` (a rank posting says where it runs,
  // so a waiter's view of it is fresh); returns it, -1 if unknown.
  static int note(const ShmSegment& seg, int rank);

  // Published as CPU + 1, so the zeroed segment reads "unknown".
  static int seen_cpu(const std::atomic<std::int32_t>& word) { return word.load(std::memory_order_relaxed) - 1; }

 private:
  static constexpr auto kRetry = std::chrono::milliseconds(20);
  std::chrono::steady_clock::time_point next_try_{};
};

}  // namespace mci::transport
