// A point in time every wait is bounded by, and the budget it came from (so
// an error can say "Timed out waiting 8000ms").
#pragma once

#include <chrono>

namespace mci {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds budget) : at_(Clock::now() + budget), budget_(budget) {}
  Deadline(Clock::time_point at, std::chrono::milliseconds budget) : at_(at), budget_(budget) {}

  Clock::time_point at() const { return at_; }
  std::chrono::milliseconds budget() const { return budget_; }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, rounded up, clamped to [0, INT_MAX] for poll().
  int poll_ms() const;
  // What is left as a wait for a store or a connect, at least 1 ms: a wait
  // of 0 means "do not wait at all" to some callees, and an expired deadline
  // must still produce their timeout error rather than skip the wait.
  std::chrono::milliseconds wait_left() const { return std::chrono::milliseconds(poll_ms() > 0 ? poll_ms() : 1); }
  std::chrono::milliseconds waited() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - (at_ - budget_));
  }

 private:
  Clock::time_point at_;
  std::chrono::milliseconds budget_;
};

inline int Deadline::poll_ms() const {
  const auto left = at_ - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
}

}  // namespace mci
