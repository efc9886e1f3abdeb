#include "group/tick_clock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

namespace mci {
namespace {

// A made counter and steady clock the test moves by hand. The clock takes
// plain function pointers (no state of its own to hold), so the fake's state
// lives here, reset by each test.
struct Fake {
  std::uint64_t ticks = 0;
  std::int64_t ns = 0;
  std::uint64_t step_per_read = 0;  // ticks that pass during each counter read (preemption)
  int steady_reads = 0;
};
Fake fake;

std::uint64_t fake_ticks() {
  const std::uint64_t t = fake.ticks;
  fake.ticks += fake.step_per_read;
  return t;
}
std::int64_t fake_steady() {
  ++fake.steady_reads;
  return fake.ns;
}

// Time passes: the steady clock by `ns`, the counter by `ns` x ticks/ns.
void pass(std::int64_t ns, double ticks_per_ns = 3.0) {
  fake.ns += ns;
  fake.ticks += static_cast<std::uint64_t>(static_cast<double>(ns) * ticks_per_ns);
}

class TickClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = Fake{};
    fake.ticks = 10'000'000'123'456'789;  // the counter and the steady clock start far apart
    fake.ns = 5'000'000'000;
    made_ = std::make_unique<TickClock>(true, TickClock::Source{fake_ticks, fake_steady});
  }
  std::unique_ptr<TickClock> made_;  // made after the fake is reset: it reads it at once
};

// Readings over `total` ns of time passing in steps of `step`: every one
// must equal the steady clock within `tolerance` ns.
void expect_follows(TickClock& c, std::int64_t total, std::int64_t step, std::int64_t tolerance,
                    double ticks_per_ns = 3.0) {
  for (std::int64_t done = 0; done < total; done += step) {
    pass(step, ticks_per_ns);
    const std::int64_t got = c.now_ns();
    ASSERT_NEAR(static_cast<double>(got), static_cast<double>(fake.ns), static_cast<double>(tolerance))
        << "after " << done + step << " ns";
  }
}

TEST_F(TickClockTest, ReadsTheSteadyClockUntilTheRateIsMeasured) {
  for (int i = 0; i < 3; ++i) {
    pass(500'000);
    const int before = fake.steady_reads;
    EXPECT_EQ(made_->now_ns(), fake.ns);
    EXPECT_EQ(fake.steady_reads, before + 1) << "no rate yet, " << (i + 1) * 500 << " us after the clock was made";
  }
  pass(600'000);  // 2.1 ms since it was made: the rate is measured now
  EXPECT_EQ(made_->now_ns(), fake.ns);
  const int before = fake.steady_reads;
  pass(300'000);
  EXPECT_NEAR(static_cast<double>(made_->now_ns()), static_cast<double>(fake.ns), 1.0);
  EXPECT_EQ(fake.steady_reads, before) << "within the anchor's millisecond, the counter alone";
}

TEST_F(TickClockTest, CountsTicksOnceTheRateIsKnownAndReanchorsEachMillisecond) {
  expect_follows(*made_, 20'000'000, 100'000, 1);  // 3 ticks a ns: the rate's 32-bit fraction floors
  // 10,000 reads over 10 ms, 1 us apart: about one steady read per ms.
  const int before = fake.steady_reads;
  expect_follows(*made_, 10'000'000, 1'000, 1);
  EXPECT_LE(fake.steady_reads - before, 12);
  EXPECT_GE(fake.steady_reads - before, 9);
}

TEST_F(TickClockTest, FollowsARateThatIsNotAWholeNumber) {
  // 2.7 GHz: 1/2.7 ns a tick is no fraction a shift of 32 bits holds
  // exactly; over a window the error must stay below a nanosecond or two.
  expect_follows(*made_, 2'100'000'000, 700'000, 2, 2.7);
}

TEST_F(TickClockTest, FollowsTheSteadyClockWhenItsRateDrifts) {
  expect_follows(*made_, 1'200'000'000, 500'000, 1);
  // NTP slews the steady clock by 500 ppm against the counter: within one
  // millisecond's anchor that is 500 ns at most, and once a whole window of
  // the new rate is measured (the one that ends near 3 s), far less.
  const double slewed = 3.0 / 1.0005;
  expect_follows(*made_, 2'000'000'000, 250'000, 510, slewed);
  expect_follows(*made_, 100'000'000, 250'000, 2, slewed);
}

TEST_F(TickClockTest, ACounterThatGoesBackFallsBackToTheSteadyClockAndMeasuresAgain) {
  expect_follows(*made_, 20'000'000, 100'000, 1);
  fake.ticks -= 1'000'000'000;  // e.g. a machine that resumed with a reset counter
  pass(10);
  EXPECT_EQ(made_->now_ns(), fake.ns);
  const int before = fake.steady_reads;
  for (int i = 0; i < 3; ++i) {
    pass(500'000);
    EXPECT_EQ(made_->now_ns(), fake.ns);
  }
  EXPECT_EQ(fake.steady_reads - before, 3) << "no rate until 2 ms of the new counter are measured";
  expect_follows(*made_, 20'000'000, 100'000, 1);
}

TEST_F(TickClockTest, ACounterThatJumpsAheadIsCaughtAtOnce) {
  expect_follows(*made_, 20'000'000, 100'000, 1);
  fake.ticks += 3'000'000'000;  // a second of ticks without steady time
  pass(100);
  EXPECT_EQ(made_->now_ns(), fake.ns);
  // The jump is inside the rate's measurement window: when the window ends
  // its rate (half the true one) is refused and measured afresh.
  expect_follows(*made_, 1'100'000'000, 250'000, 1);
}

TEST_F(TickClockTest, APreemptedPairOfReadingsNeverBecomesTheAnchor) {
  fake.step_per_read = 1'000'000;  // every counter read lands far from the steady read beside it
  for (int i = 0; i < 30; ++i) {
    pass(1'000'000);
    EXPECT_EQ(made_->now_ns(), fake.ns);
  }
}

// A counter made from the real steady clock (3 ticks a ns), so that time
// passes while settle() sleeps.
std::int64_t real_steady() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::uint64_t real_ticks() { return static_cast<std::uint64_t>(real_steady()) * 3 + 777; }

TEST(TickClock, SettleWaitsUntilTheRateIsMeasured) {
  TickClock c(true, TickClock::Source{real_ticks, real_steady});
  EXPECT_FALSE(c.counting());
  const std::int64_t t0 = real_steady();
  c.settle();
  EXPECT_TRUE(c.counting());
  EXPECT_GE(real_steady() - t0, TickClock::kFirstRateAfterNs - 100'000) << "it cannot know the rate sooner";
  const std::int64_t before = real_steady();
  const std::int64_t got = c.now_ns();
  const std::int64_t after = real_steady();
  // The anchor sits within half a pair of readings (tens of ns) of the truth.
  EXPECT_GE(got, before - 1'000);
  EXPECT_LE(got, after + 1'000);
}

TEST(TickClock, SettleReturnsAtOnceWhenTurnedOff) {
  TickClock c(false, TickClock::Source{real_ticks, real_steady});
  const std::int64_t t0 = real_steady();
  c.settle();
  EXPECT_FALSE(c.counting());
  EXPECT_LT(real_steady() - t0, TickClock::kFirstRateAfterNs);
}

TEST(TickClock, TurnedOffIsTheSteadyClock) {
  fake = Fake{};
  TickClock c(false, TickClock::Source{fake_ticks, fake_steady});
  EXPECT_FALSE(c.uses_counter());
  for (int i = 0; i < 20; ++i) {
    pass(1'000'000);
    EXPECT_EQ(c.now_ns(), fake.ns);
  }
  EXPECT_EQ(fake.steady_reads, 20);
}

// The real counter against the real steady clock: each reading must fall
// between two steady readings taken around it (preemption only widens the
// bracket), within a few microseconds of anchor error.

// Reads `c` for `ns` of steady time; returns how many readings fell outside
// the steady readings around them by more than 20 us.
long misses_over(TickClock& c, std::int64_t ns, long& reads) {
  constexpr std::int64_t kTolerance = 20'000;
  long misses = 0;
  const std::int64_t start = real_steady();
  while (real_steady() - start < ns) {
    const std::int64_t before = real_steady();
    const std::int64_t got = c.now_ns();
    const std::int64_t after = real_steady();
    if (got < before - kTolerance || got > after + kTolerance) ++misses;
    ++reads;
  }
  return misses;
}

TEST(TickClock, TheHardwareCounterStaysWithTheSteadyClock) {
  if (!TickClock::counter_usable()) GTEST_SKIP() << "this CPU's time-stamp counter is not invariant";
  TickClock c(true);
  EXPECT_TRUE(c.uses_counter());
  long reads = 0;
  EXPECT_EQ(misses_over(c, 50'000'000, reads), 0);
  EXPECT_GT(reads, 1000);
}

// Threads share one clock (a group's callers and its progress thread):
// every reading stays right while others re-anchor it.
TEST(TickClock, ThreadsShareOneClock) {
  if (!TickClock::counter_usable()) GTEST_SKIP() << "this CPU's time-stamp counter is not invariant";
  TickClock c(true);
  std::atomic<long> misses{0}, reads{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      long n = 0;
      misses += misses_over(c, 30'000'000, n);
      reads += n;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(misses.load(), 0);
  EXPECT_GT(reads.load(), 1000);
}

}  // namespace
}  // namespace mci
