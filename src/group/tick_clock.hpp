// The steady clock, read from the CPU's time-stamp counter where that is
// safe. A collective's front end reads the clock twice (submit and finish:
// the timeout, the flight recorder, the arrival that names the last rank,
// Work::duration). Under a hypervisor the steady clock costs 27-50 ns a read
// (kvm-clock: a versioned page read around an ordered rdtsc): without its two
// reads an 8-byte all-reduce between two ranks took 0.55 us instead of 0.65;
// an unordered rdtsc costs 11 ns.
//
// The counter's rate is measured against the steady clock itself, over the
// last second or so, and the clock re-anchors on the steady clock at least
// every millisecond: so it follows the steady clock (and NTP's slewing of it)
// to well under a microsecond, and a counter that jumps or stops is caught
// within a millisecond. The measurement starts when the clock is made (a
// group makes it before its ranks meet). Until 2 ms of it, and wherever the
// counter is not invariant (no constant_tsc/nonstop_tsc, not x86-64) or
// MCI_CLOCK=steady, every read is the steady clock itself.
//
// Safe to share between threads: readers take a consistent snapshot of the
// anchor (a sequence lock); one re-anchors while the others read the steady
// clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mci {

class TickClock {
 public:
  // Where the readings come from: the hardware, or a test's own.
  struct Source {
    std::uint64_t (*ticks)();
    std::int64_t (*steady_ns)();
  };
  static Source hardware();
  // Whether this machine's counter can stand for the steady clock.
  static bool counter_usable();

  // use_counter false: every read is the steady clock.
  explicit TickClock(bool use_counter, Source source = hardware());

  // Waits until the rate is measured (at most 2 ms after the clock was
  // made; a group calls it when its ranks have met, which mostly took
  // longer), so that the first calls already read the counter. Gives up
  // after a few tries on a machine that keeps preempting the readings.
  void settle();

  std::int64_t now_ns();
  std::chrono::steady_clock::time_point now() {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(now_ns()));
  }
  bool uses_counter() const { return use_counter_; }
  // Whether the counter's rate is known (reads come from the counter).
  bool counting() const { return mult_.load(std::memory_order_acquire) != 0; }

  // How often the clock re-anchors, and how long it measures the rate before
  // trusting it.
  static constexpr std::int64_t kAnchorEveryNs = 1'000'000;
  static constexpr std::int64_t kFirstRateAfterNs = 2'000'000;
  static constexpr std::int64_t kRateWindowNs = 1'000'000'000;

 private:
  std::int64_t reanchor();

  bool use_counter_;
  Source src_;
  // The anchor: ns = anchor_ns + (ticks - anchor_ticks) * mult / 2^32, valid
  // for `span` ticks after anchor_ticks (0: no rate yet). Written under the
  // sequence lock `version` (odd while being written).
  std::atomic<std::uint64_t> version_{0};
  std::atomic<std::uint64_t> anchor_ticks_{0};
  std::atomic<std::int64_t> anchor_ns_{0};
  std::atomic<std::uint64_t> mult_{0};
  std::atomic<std::uint64_t> span_{0};
  // The rate's measurement: its start, and the one writer at a time.
  std::uint64_t rate_ticks_ = 0;
  std::int64_t rate_ns_ = 0;
  std::int64_t rate_baseline_ns_ = 0;  // how long the measurement behind mult_ was
  std::atomic<bool> writing_{false};
};

}  // namespace mci
