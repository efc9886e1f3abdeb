// The shared-memory step protocol with one thread per rank in this process:
// each thread maps the segment on its own, as a process would.
#include <gtest/gtest.h>

#include "support/fingerprints.hpp"

#include <atomic>
#include <cstring>
#include <functional>
#include <latch>
#include <optional>

#include "mci/errors.hpp"
#include "support/shm_names.hpp"
#include "support/thread_ranks.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::transport {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kBufferBytes = 64 * 1024;

// Runs body(world) on n threads: rank 0's segment is created here, the
// others open it by name in their own thread, and the name is removed once
// everyone has mapped it. group_ranks as ShmWorld takes them.
void with_world(int n, const std::function<void(ShmWorld&)>& body, std::vector<int> group_ranks = {},
                const std::function<bool(int)>& single_copy = {}) {
  const std::string name = test::unique_shm_name("shm-world");
  std::optional<ShmSegment> created(ShmSegment::create(name, n, kBufferBytes));
  std::latch mapped(n);
  const std::vector<std::string> errors = test::run_threads(n, [&](int r) {
    bool arrived = false;
    try {
      ShmWorld w(r == 0 ? std::move(*created) : ShmSegment::open(name, n, kBufferBytes), r, n, group_ranks, ShmWait{},
                 single_copy && single_copy(r));
      arrived = true;
      mapped.arrive_and_wait();
      if (r == 0) w.unlink_name();
      body(w);
    } catch (...) {
      if (!arrived) mapped.count_down();  // a failed open must not strand the others
      throw;
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

Fingerprint gather_fingerprint(std::uint64_t seq, std::uint64_t count) {
  return test::coll_fingerprint(seq, count, OpKind::all_gather, DType::i32);
}

TEST(ShmWorld, EveryRankReadsWhatEveryRankStagedAtEachStep) {
  constexpr int kSteps = 6;  // several of each parity: buffers are reused
  constexpr std::size_t kInts = 1000;
  with_world(3, [](ShmWorld& w) {
    const Deadline dl(10000ms);
    for (int i = 0; i < kSteps; ++i) {
      const std::uint64_t s = w.next_step();
      const Fingerprint fp = gather_fingerprint(1, kInts);
      auto* mine = reinterpret_cast<int*>(w.staging(w.rank(), s));
      for (std::size_t k = 0; k < kInts; ++k) mine[k] = w.rank() * 1000000 + i * 1000 + static_cast<int>(k);
      std::memcpy(w.small(w.rank(), s), &i, sizeof i);
      w.post_ready(s, fp);
      w.wait_ready(s, fp, dl);
      for (int r = 0; r < w.size(); ++r) {
        const auto* theirs = reinterpret_cast<const int*>(w.staging(r, s));
        for (std::size_t k = 0; k < kInts; ++k) {
          ASSERT_EQ(theirs[k], r * 1000000 + i * 1000 + static_cast<int>(k)) << "rank " << r << " step " << s;
        }
        int small = -1;
        std::memcpy(&small, w.small(r, s), sizeof small);
        EXPECT_EQ(small, i);
      }
    }
    // The reduced flag: every rank publishes a result for the last step.
    const std::uint64_t s = kSteps;
    w.post_reduced(s);
    w.wait_reduced(s, gather_fingerprint(1, kInts), dl);
  });
}

TEST(ShmWorld, FingerprintDisagreementIsAMismatch) {
  with_world(2, [](ShmWorld& w) {
    const std::uint64_t s = w.next_step();
    const Fingerprint fp = gather_fingerprint(4, w.rank() == 0 ? 1 : 2);
    w.post_ready(s, fp);
    try {
      w.wait_ready(s, fp, Deadline(5000ms));
      ADD_FAILURE() << "no mismatch";
    } catch (const MismatchError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("all_gather #4 (i32 x 1)"), std::string::npos) << m;
      EXPECT_NE(m.find("all_gather #4 (i32 x 2)"), std::string::npos) << m;
    }
  });
}

TEST(ShmWorld, TimeoutNamesTheRankThatNeverPosted) {
  with_world(3, [](ShmWorld& w) {
    if (w.rank() == 2) return;  // never enters the step
    const std::uint64_t s = w.next_step();
    const Fingerprint fp = gather_fingerprint(7, 1);
    w.post_ready(s, fp);
    const auto start = Clock::now();
    try {
      w.wait_ready(s, fp, Deadline(200ms));
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Timed out waiting 200ms for all_gather #7"), std::string::npos) << m;
      EXPECT_NE(m.find("no answer from rank 2 ("), std::string::npos) << m;
    }
    EXPECT_GE(Clock::now() - start, 200ms);
  });
}

TEST(ShmWorld, AbortIsSeenByAWaitingPeerUnderItsGroupRank) {
  // World ranks 0 and 1 are group ranks 4 and 6 (a host of a larger group).
  with_world(2,
             [](ShmWorld& w) {
               if (w.rank() == 1) {
                 w.abort("rank 6 gave up: testing");
                 return;
               }
               const std::uint64_t s = w.next_step();
               w.post_ready(s, gather_fingerprint(1, 1));
               const auto start = Clock::now();
               try {
                 w.wait_ready(s, gather_fingerprint(1, 1), Deadline(10000ms));
                 ADD_FAILURE() << "no error";
               } catch (const PeerError& e) {
                 EXPECT_EQ(e.peer(), 6);
                 EXPECT_NE(std::string(e.what()).find("rank 6 aborted the group: rank 6 gave up: testing"),
                           std::string::npos)
                     << e.what();
               }
               EXPECT_LT(Clock::now() - start, 5000ms) << "the abort must end the wait, not its deadline";
             },
             {4, 6});
}

// A peer that posts, finishes and exits between the waiter's read of its flag
// and the check of its process owes nothing (256 ranks on 2 cores hit that
// window: "rank 61 exited or crashed" from a rank that had exited 0); one
// found gone that never posted is still a PeerError naming it. The probe
// stands in for the kernel: it makes rank 1 post, then says it is gone.
TEST(ShmWorld, APeerThatPostedThenExitedBeforeTheLivenessCheckOwesNothing) {
  for (const bool posts_before_exit : {true, false}) {
    std::atomic<ShmWorld*> peer{nullptr};
    std::latch peer_ready(1);
    std::latch waiter_done(1);
    with_world(2, [&](ShmWorld& w) {
      const std::uint64_t s = w.next_step();
      const Fingerprint fp = gather_fingerprint(3, 1);
      if (w.rank() == 1) {
        peer = &w;
        peer_ready.count_down();
        waiter_done.wait();  // keeps its mapping while rank 0 posts on its behalf
        return;
      }
      peer_ready.wait();
      // Rank 1 is released however this rank's wait ends, even by an
      // unexpected exception: a failing test must not hang the suite.
      struct Release {
        std::latch& done;
        ~Release() { done.count_down(); }
      } release{waiter_done};
      int probes = 0;
      w.set_process_probe([&](pid_t) {
        if (posts_before_exit && ++probes == 1) peer.load()->post_ready(s, fp);
        return false;
      });
      w.post_ready(s, fp);
      try {
        w.wait_ready(s, fp, Deadline(10000ms));
        EXPECT_TRUE(posts_before_exit) << "a peer gone without posting must be an error";
      } catch (const PeerError& e) {
        EXPECT_FALSE(posts_before_exit) << "it posted before it left: " << e.what();
        EXPECT_EQ(e.peer(), 1);
        EXPECT_NE(std::string(e.what()).find("rank 1 (pid "), std::string::npos) << e.what();
      }
    });
  }
}

// Single copy: every rank reads another's buffer straight from its memory
// (the threads stand for processes: process_vm_readv reads this one), and
// the steps go on after it as before.
TEST(ShmWorld, SingleCopyReadsEachPeersBufferWhenEveryRankAllowsIt) {
  with_world(
      3,
      [](ShmWorld& w) {
        const Fingerprint fp = gather_fingerprint(1, 1000);
        const Deadline dl(5s);
        ASSERT_TRUE(w.single_copy(fp, dl));
        std::vector<std::int32_t> mine(1000);
        for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = w.rank() * 100000 + static_cast<std::int32_t>(i);
        const std::uint64_t s = w.next_step();
        const auto at = reinterpret_cast<std::uintptr_t>(mine.data());
        std::memcpy(w.small(w.rank(), s), &at, sizeof at);
        w.post_ready(s, fp);
        w.wait_ready(s, fp, dl);
        for (int r = 0; r < w.size(); ++r) {
          std::uintptr_t theirs = 0;
          std::memcpy(&theirs, w.small(r, s), sizeof theirs);
          std::vector<std::int32_t> got(1000);
          w.read_peer(r, theirs, got.data(), got.size() * sizeof(std::int32_t));
          for (std::size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i], r * 100000 + static_cast<std::int32_t>(i)) << "rank " << w.rank() << " from " << r;
          }
        }
        w.post_read(s);
        w.wait_read(s, fp, dl);
        // Decided once: asking again takes no step.
        const std::uint64_t before = w.next_step();
        EXPECT_TRUE(w.single_copy(fp, dl));
        EXPECT_EQ(w.next_step(), before + 1);
      },
      {}, [](int) { return true; });
}

TEST(ShmWorld, SingleCopyIsOffOnEveryRankWhenOneDoesNotAllowIt) {
  with_world(
      3,
      [](ShmWorld& w) {
        const Deadline dl(5s);
        EXPECT_FALSE(w.single_copy(gather_fingerprint(1, 8), dl)) << "rank " << w.rank();
        EXPECT_FALSE(w.single_copy(gather_fingerprint(1, 8), dl));
        // The steps stay in line after the probe.
        const std::uint64_t s = w.next_step();
        w.post_ready(s, gather_fingerprint(2, 8));
        w.wait_ready(s, gather_fingerprint(2, 8), dl);
      },
      {}, [](int r) { return r != 1; });
}

// A read the kernel refuses names the ranks and the way out.
TEST(ShmWorld, AReadTheKernelRefusesSaysWhichRankAndWhatToDo) {
  with_world(
      2,
      [](ShmWorld& w) {
        std::uint64_t word = 0;
        try {
          // An address no process maps: the kernel refuses the read.
          w.read_peer(1 - w.rank(), 8, &word, sizeof word);
          ADD_FAILURE() << "read an unmapped address";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("could not read rank"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("MCI_SHM_SINGLE_COPY=never"), std::string::npos) << e.what();
        }
      },
      {}, [](int) { return true; });
}

}  // namespace
}  // namespace mci::transport
