#include "group/tick_clock.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mci {

namespace {

using u128 = unsigned __int128;

std::uint64_t hardware_ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

std::int64_t hardware_steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A pair of readings more than this many ticks apart (the thread was
// preempted or interrupted between them) would misplace the anchor and skew
// the rate: 0.4-2 us at the 1-5 GHz counters of x86 machines, where a pair
// takes 30-60 ns.
constexpr std::uint64_t kMaxPairTicks = 2'000;
// A new rate more than 1/1000 away from the last one is a counter that
// jumped (NTP slews the steady clock by 500 ppm at most).
constexpr std::uint64_t kMaxRateChange = 1000;

}  // namespace

TickClock::Source TickClock::hardware() { return Source{hardware_ticks, hardware_steady_ns}; }

bool TickClock::counter_usable() {
#if defined(__x86_64__)
  // Invariant: the same rate in every power state, and not stopped in deep
  // sleep; the kernel says so in the flags of every CPU alike.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    return line.find(" constant_tsc ") != std::string::npos && line.find(" nonstop_tsc ") != std::string::npos;
  }
#endif
  return false;
}

TickClock::TickClock(bool use_counter, Source source) : use_counter_(use_counter), src_(source) {
  if (use_counter_) reanchor();  // the rate's measurement starts now
}

std::int64_t TickClock::now_ns() {
  if (!use_counter_) return src_.steady_ns();
  const std::uint64_t t = src_.ticks();
  // Release stores of the anchor keep the writer's odd version before them;
  // acquire loads keep the second version check after them.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) break;
    const std::uint64_t at = anchor_ticks_.load(std::memory_order_acquire);
    const std::int64_t ns = anchor_ns_.load(std::memory_order_acquire);
    const std::uint64_t mult = mult_.load(std::memory_order_acquire);
    const std::uint64_t span = span_.load(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) != v) continue;
    // Unsigned: a counter behind the anchor (another thread re-anchored
    // after `t` was read, or the counter went back) reads as far past it.
    const std::uint64_t dt = t - at;
    if (dt >= span) break;  // also span 0: no rate yet
    return ns + static_cast<std::int64_t>((static_cast<u128>(dt) * mult) >> 32);
  }
  return reanchor();
}

void TickClock::settle() {
  if (!use_counter_) return;
  // A pair of readings split by a preemption is refused (kMaxPairTicks), and
  // on a loaded machine several in a row may be: a few more tries, each a
  // sleep of 0.1 ms or more, rather than a clock left without its rate (the
  // Debug suite on a busy 2-core runner saw four refused).
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::int64_t now = reanchor();
    if (mult_.load(std::memory_order_acquire) != 0) return;
    // No other thread uses the clock yet: rate_ns_ is this thread's to read.
    const std::int64_t left = rate_ns_ + kFirstRateAfterNs - now;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<std::int64_t>(left, 100'000)));
  }
}

std::int64_t TickClock::reanchor() {
  const std::uint64_t t1 = src_.ticks();
  const std::int64_t ns = src_.steady_ns();
  const std::uint64_t t2 = src_.ticks();
  bool idle = false;
  if (t2 < t1 || t2 - t1 > kMaxPairTicks) return ns;
  if (!writing_.compare_exchange_strong(idle, true, std::memory_order_acquire)) return ns;
  const std::uint64_t t = t1 + (t2 - t1) / 2;
  std::uint64_t mult = mult_.load(std::memory_order_relaxed);
  auto measure_afresh = [&] {
    rate_ticks_ = t;
    rate_ns_ = ns;
    rate_baseline_ns_ = 0;
    mult = 0;
  };
  if (rate_ns_ == 0 || t <= rate_ticks_ || ns <= rate_ns_) {
    // The first reading, or a counter that went back: read the steady clock
    // until the rate is known again.
    measure_afresh();
  } else {
    const std::int64_t elapsed = ns - rate_ns_;
    // The first rate after kFirstRateAfterNs, refined at each anchor until a whole
    // window is measured; then one rate per window, from a fresh window, so
    // the rate follows NTP's slewing of the steady clock.
    const bool window_done = elapsed >= kRateWindowNs;
    if (elapsed >= kFirstRateAfterNs && (rate_baseline_ns_ < kRateWindowNs || window_done)) {
      const auto measured = static_cast<std::uint64_t>((static_cast<u128>(elapsed) << 32) / (t - rate_ticks_));
      if (mult != 0 && (measured > mult + mult / kMaxRateChange || measured < mult - mult / kMaxRateChange)) {
        // More than NTP ever slews: the counter jumped during the
        // measurement.
        measure_afresh();
      } else {
        mult = measured;
        rate_baseline_ns_ = elapsed;
        if (window_done) {
          rate_ticks_ = t;
          rate_ns_ = ns;
        }
      }
    }
  }
  const std::uint64_t span =
      mult == 0 ? 0 : static_cast<std::uint64_t>((static_cast<u128>(kAnchorEveryNs) << 32) / mult);
  const std::uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  anchor_ticks_.store(t, std::memory_order_release);
  anchor_ns_.store(ns, std::memory_order_release);
  mult_.store(mult, std::memory_order_release);
  span_.store(span, std::memory_order_release);
  version_.store(v + 2, std::memory_order_release);
  writing_.store(false, std::memory_order_release);
  return ns;
}

}  // namespace mci
