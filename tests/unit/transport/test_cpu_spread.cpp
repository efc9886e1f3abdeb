// CpuSpread: a waiting rank that finds the rank it waits for on its own CPU
// moves to a CPU no rank of its host was seen on, and keeps its mask; where
// it cannot move, it is told to stop spinning.
#include <gtest/gtest.h>

#include <sched.h>

#include <optional>

#include "support/shm_names.hpp"
#include "transport/shm/cpu_spread.hpp"
#include "transport/shm/shm_segment.hpp"

namespace mci::transport {
namespace {

cpu_set_t mask_of_this_thread() {
  cpu_set_t m;
  CPU_ZERO(&m);
  EXPECT_EQ(::sched_getaffinity(0, sizeof m, &m), 0);
  return m;
}

// Pins this thread to its first two allowed CPUs for the test's length and
// gives the old mask back at the end; empty when fewer than two are allowed.
class TwoCpus {
 public:
  TwoCpus() : saved_(mask_of_this_thread()) {
    for (int c = 0; c < CPU_SETSIZE && n_ < 2; ++c) {
      if (CPU_ISSET(c, &saved_)) cpus_[n_++] = c;
    }
    if (n_ < 2) return;
    cpu_set_t two;
    CPU_ZERO(&two);
    CPU_SET(cpus_[0], &two);
    CPU_SET(cpus_[1], &two);
    EXPECT_EQ(::sched_setaffinity(0, sizeof two, &two), 0);
  }
  ~TwoCpus() { ::sched_setaffinity(0, sizeof saved_, &saved_); }
  bool ok() const { return n_ == 2; }
  int other_than(int c) const { return c == cpus_[0] ? cpus_[1] : cpus_[0]; }

 private:
  cpu_set_t saved_;
  int cpus_[2] = {-1, -1};
  int n_ = 0;
};

struct Segment {
  explicit Segment(int ranks) : seg(ShmSegment::create(test::unique_shm_name("cpu-spread"), ranks, 4096)) {
    seg.unlink();
  }
  void saw(int rank, int cpu) { seg.control(rank).cpu.store(cpu + 1); }
  int seen(int rank) const { return CpuSpread::seen_cpu(seg.control(rank).cpu); }
  ShmSegment seg;
};

TEST(CpuSpread, ARankStackedWithTheRankItWaitsForMovesToAFreeCpuAndKeepsItsMask) {
  TwoCpus two;
  if (!two.ok()) GTEST_SKIP() << "needs two CPUs in this process's affinity mask";
  const cpu_set_t before = mask_of_this_thread();
  Segment s(2);
  const int here = ::sched_getcpu();
  s.saw(1, here);  // rank 1, the awaited one, was last seen on this CPU
  CpuSpread spread;
  EXPECT_EQ(spread.check(s.seg, 0, 2, 1), CpuSpread::Placement::moved);
  EXPECT_EQ(::sched_getcpu(), two.other_than(here));
  EXPECT_EQ(s.seen(0), two.other_than(here)) << "the move is published for the other ranks";
  const cpu_set_t after = mask_of_this_thread();
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the affinity mask must be given back whole";
}

TEST(CpuSpread, NoMoveWhenTheAwaitedRankIsElsewhere) {
  TwoCpus two;
  if (!two.ok()) GTEST_SKIP() << "needs two CPUs in this process's affinity mask";
  Segment s(2);
  const int here = ::sched_getcpu();
  s.saw(1, two.other_than(here));
  CpuSpread spread;
  EXPECT_EQ(spread.check(s.seg, 0, 2, 1), CpuSpread::Placement::apart);
  EXPECT_EQ(s.seen(0), ::sched_getcpu()) << "a waiting rank always publishes where it is";
}

TEST(CpuSpread, NoMoveWhenEveryOtherCpuHoldsARank) {
  TwoCpus two;
  if (!two.ok()) GTEST_SKIP() << "needs two CPUs in this process's affinity mask";
  Segment s(3);
  const int here = ::sched_getcpu();
  s.saw(1, here);
  s.saw(2, two.other_than(here));  // the only other CPU is taken
  CpuSpread spread;
  EXPECT_EQ(spread.check(s.seg, 0, 3, 1), CpuSpread::Placement::stacked)
      << "nowhere to go: the wait stops spinning instead";
  EXPECT_EQ(::sched_getcpu(), here);
}

TEST(CpuSpread, APostingRankPublishesItsCpu) {
  Segment s(2);
  CpuSpread::note(s.seg, 1);
  EXPECT_EQ(s.seen(1), ::sched_getcpu());
}

TEST(CpuSpread, ARankPinnedToOneCpuStaysThere) {
  const cpu_set_t saved = mask_of_this_thread();
  const int here = ::sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(here, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
  Segment s(2);
  s.saw(1, here);
  CpuSpread spread;
  EXPECT_EQ(spread.check(s.seg, 0, 2, 1), CpuSpread::Placement::stacked) << "cannot move: the wait stops spinning";
  EXPECT_EQ(::sched_getcpu(), here);
  const cpu_set_t after = mask_of_this_thread();
  EXPECT_TRUE(CPU_EQUAL(&one, &after)) << "a mask set by the user or the launcher is kept";
  ::sched_setaffinity(0, sizeof saved, &saved);
}

TEST(CpuSpread, TriesAgainOnlyAfterAPause) {
  TwoCpus two;
  if (!two.ok()) GTEST_SKIP() << "needs two CPUs in this process's affinity mask";
  Segment s(2);
  CpuSpread spread;
  s.saw(1, ::sched_getcpu());
  ASSERT_EQ(spread.check(s.seg, 0, 2, 1), CpuSpread::Placement::moved);
  // Stacked again at once (the kernel moved a rank back): no second move
  // within the pause, so two ranks never chase each other around the CPUs;
  // the wait stops spinning and sleeps instead.
  const int now_on = ::sched_getcpu();
  s.saw(1, now_on);
  EXPECT_EQ(spread.check(s.seg, 0, 2, 1), CpuSpread::Placement::stacked);
  EXPECT_EQ(::sched_getcpu(), now_on);
}

}  // namespace
}  // namespace mci::transport
