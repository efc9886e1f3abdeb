// The in-process transport, one thread per rank: it must keep TcpTransport's
// contract, since algorithm tests trust it to stand in for the network.
#include <gtest/gtest.h>

#include "support/fingerprints.hpp"

#include <time.h>

#include <future>
#include <mutex>

#include "mci/errors.hpp"
#include "support/loopback_ranks.hpp"
#include "support/loopback_transport.hpp"

namespace mci::transport {
namespace {

using namespace std::chrono_literals;

using test::with_loopback;

using test::coll;
using test::p2p;

// A one-shot signal between the rank threads of a test. The rank that owes
// it holds a Notify, so it is sent however that rank's body ends.
class Event {
 public:
  void set() {
    std::call_once(once_, [&] { promise_.set_value(); });
  }
  void wait() const { future_.wait(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  std::once_flag once_;
};

struct Notify {
  Event& e;
  ~Notify() { e.set(); }
};

std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

TEST(LoopbackTransport, EveryPairExchangesInBothDirections) {
  with_loopback(4, [](LoopbackTransport& t) {
    const int n = t.size(), r = t.rank();
    EXPECT_STREQ(t.name(), "loopback");
    std::vector<std::vector<int>> in(n, std::vector<int>(300000)), out(n, std::vector<int>(300000, -1));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (std::size_t i = 0; i < in[p].size(); ++i) in[p][i] = r * 100 + p + static_cast<int>(i % 7);
      t.post_send(p, coll(1, 300000), in[p].data(), in[p].size() * 4);
      t.post_recv(p, coll(1, 300000), out[p].data(), out[p].size() * 4);
    }
    t.wait_all(Deadline(10000ms));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (std::size_t i = 0; i < out[p].size(); ++i) {
        ASSERT_EQ(out[p][i], p * 100 + r + static_cast<int>(i % 7)) << "from " << p << " element " << i;
      }
    }
  });
}

TEST(LoopbackTransport, FramesArriveInPostingOrderAndOneCanBeAwaitedAlone) {
  with_loopback(2, [](LoopbackTransport& t) {
    const int peer = 1 - t.rank();
    int sent[3] = {10 + t.rank(), 20 + t.rank(), 30 + t.rank()}, got[3] = {0, 0, 0};
    for (int& v : sent) t.post_send(peer, coll(1, 1), &v, 4);
    std::vector<OpHandle> hs;
    for (int& v : got) hs.push_back(t.post_recv(peer, coll(1, 1), &v, 4));
    EXPECT_FALSE(t.done(hs[0])) << "nothing moves before a wait";
    t.wait(hs[0], Deadline(5000ms));
    EXPECT_TRUE(t.done(hs[0]));
    EXPECT_EQ(got[0], 10 + peer);
    t.wait_all(Deadline(5000ms));
    EXPECT_EQ(got[1], 20 + peer);
    EXPECT_EQ(got[2], 30 + peer);
    EXPECT_TRUE(t.done(hs[2])) << "handles stay answerable after wait_all";
  });
}

TEST(LoopbackTransport, SendCompletesBeforeTheReceiveIsPosted) {
  Event sent;
  with_loopback(2, [&](LoopbackTransport& t) {
    if (t.rank() == 0) {
      Notify notify{sent};
      int v = 42;
      t.post_send(1, coll(1, 1), &v, 4);
      t.wait_all(Deadline(5000ms));  // would time out if it needed rank 1's recv
      v = -1;                        // the frame owns its bytes now
    } else {
      sent.wait();
      int got = 0;
      t.post_recv(0, coll(1, 1), &got, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got, 42);
    }
  });
}

TEST(LoopbackTransport, PointToPointFramesWaitForTheRecvOfTheirTag) {
  with_loopback(2, [](LoopbackTransport& t) {
    if (t.rank() == 0) {
      int x = 7, y = 8;
      t.post_send(1, p2p(1, 1), &x, 4);
      t.post_send(1, p2p(2, 1), &y, 4);
      t.wait_all(Deadline(5000ms));
    } else {
      int got = 0;
      t.post_recv(0, p2p(2, 1), &got, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got, 8);
      t.post_recv(0, p2p(1, 1), &got, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got, 7);
    }
  });
}

// The thread tests' transport names its peers: a receive from any source
// (the cpu backend's, over TCP) is refused, saying so.
TEST(LoopbackTransport, RefusesAReceiveFromAnySource) {
  LoopbackTransport t(std::make_shared<LoopbackHub>(2), 0);
  int v = 0;
  try {
    t.post_recv_any(p2p(7, 1), &v, 4);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "the loopback transport cannot receive from any source (tag 7); name the sending rank"),
              std::string::npos)
        << e.what();
  }
  t.close();
}

TEST(LoopbackTransport, ProgressMovesPostedWorkInBoundedRounds) {
  with_loopback(2, [](LoopbackTransport& t) {
    const int peer = 1 - t.rank();
    int mine = t.rank() + 1, got = 0;
    const Deadline dl(5000ms);
    t.post_send(peer, p2p(3, 1), &mine, 4);
    const OpHandle h = t.post_recv(peer, p2p(3, 1), &got, 4);
    while (!t.done(h)) t.progress(10ms, dl);
    t.reap();
    EXPECT_EQ(got, peer + 1);
    // Nothing pending: a round returns at once, even with the deadline gone.
    t.progress(10ms, Deadline(0ms));
  });
}

TEST(LoopbackTransport, FingerprintDisagreementIsAMismatch) {
  with_loopback(2, [](LoopbackTransport& t) {
    float v = 0;
    if (t.rank() == 0) {
      t.post_send(1, coll(1, 1), &v, 4);
      t.wait_all(Deadline(3000ms));
      return;
    }
    Fingerprint mine = coll(1, 1);
    mine.op = ReduceOp::max;
    t.post_recv(0, mine, &v, 4);
    try {
      t.wait_all(Deadline(3000ms));
      ADD_FAILURE() << "no mismatch";
    } catch (const MismatchError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 1 called all_reduce #1 (f32 x 1, max)"), std::string::npos) << m;
      EXPECT_NE(m.find("rank 0 called all_reduce #1 (f32 x 1, sum)"), std::string::npos) << m;
    }
    // Like TcpTransport: after an error the transport refuses new work.
    EXPECT_THROW(t.post_send(0, coll(2, 1), &v, 4), Error);
  });
}

TEST(LoopbackTransport, AnotherSequenceNumberAheadOfOursIsAMismatch) {
  with_loopback(2, [](LoopbackTransport& t) {
    float v = 0;
    if (t.rank() == 0) {
      t.post_send(1, coll(2, 1), &v, 4);
      t.wait_all(Deadline(3000ms));
    } else {
      t.post_recv(0, coll(1, 1), &v, 4);
      EXPECT_THROW(t.wait_all(Deadline(3000ms)), MismatchError);
    }
  });
}

TEST(LoopbackTransport, ByteCountDisagreementIsAMismatch) {
  with_loopback(2, [](LoopbackTransport& t) {
    int v[2] = {0, 0};
    if (t.rank() == 0) {
      t.post_send(1, coll(1, 2), v, 8);
      t.wait_all(Deadline(3000ms));
      return;
    }
    // Same fingerprint, another size: the ranks cut a buffer differently.
    t.post_recv(0, coll(1, 2), v, 4);
    try {
      t.wait_all(Deadline(3000ms));
      ADD_FAILURE() << "no mismatch";
    } catch (const MismatchError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("expected 4 bytes"), std::string::npos) << m;
      EXPECT_NE(m.find("sent 8 bytes"), std::string::npos) << m;
    }
  });
  with_loopback(2, [](LoopbackTransport& t) {
    int v[2] = {0, 0};
    if (t.rank() == 0) {
      t.post_send(1, p2p(9, 2), v, 8);
      t.wait_all(Deadline(3000ms));
      return;
    }
    t.post_recv(0, p2p(9, 1), v, 4);
    try {
      t.wait_all(Deadline(3000ms));
      ADD_FAILURE() << "no mismatch";
    } catch (const MismatchError& e) {
      EXPECT_NE(std::string(e.what()).find("point-to-point mismatch"), std::string::npos) << e.what();
    }
  });
}

TEST(LoopbackTransport, TimeoutNamesTheSilentPeerAndTheBudgetWithoutSpinning) {
  Event finished;
  with_loopback(3, [&](LoopbackTransport& t) {
    if (t.rank() == 0) {
      Notify notify{finished};
      int v = 0, w = 0;
      int one = 1;
      t.post_send(1, coll(5, 1), &one, 4);
      t.post_recv(1, coll(5, 1), &w, 4);  // answered
      t.post_recv(2, coll(5, 1), &v, 4);  // never answered
      const auto cpu_before = thread_cpu_time();
      const auto start = Clock::now();
      try {
        t.wait_all(Deadline(300ms));
        ADD_FAILURE() << "no timeout";
      } catch (const TimeoutError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("Timed out waiting 300ms for all_reduce #5"), std::string::npos) << m;
        EXPECT_NE(m.find("no answer from rank 2 ("), std::string::npos) << m;
        EXPECT_NE(m.find("waiting for 4 bytes from rank 2"), std::string::npos) << m;
      }
      EXPECT_GE(Clock::now() - start, 300ms);
      // A wait sleeps: a busy loop would burn the whole 300 ms.
      EXPECT_LT(thread_cpu_time() - cpu_before, 150ms);
      return;
    } else if (t.rank() == 1) {
      int one = 1, got = 0;
      t.post_send(0, coll(5, 1), &one, 4);
      t.post_recv(0, coll(5, 1), &got, 4);
      t.wait_all(Deadline(5000ms));
    }
    // Rank 2 stays in the group, silent, until rank 0 has given up on it.
    finished.wait();
  });
}

TEST(LoopbackTransport, AbortReasonReachesAPeerWaitingForTheAbortingRank) {
  with_loopback(3, [](LoopbackTransport& t) {
    if (t.rank() == 2) {
      t.abort("rank 2 gave up: testing");
      int v = 0;
      EXPECT_THROW(t.post_send(0, coll(1, 1), &v, 4), Error) << "an aborted transport takes no work";
      return;
    }
    int v = 0;
    t.post_recv(2, coll(1, 1), &v, 4);
    const auto start = Clock::now();
    try {
      t.wait_all(Deadline(10000ms));
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer(), 2);
      EXPECT_NE(std::string(e.what()).find("rank 2 aborted the group: rank 2 gave up: testing"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(Clock::now() - start, 5000ms) << "the abort must wake the waiter, not its deadline";
  });
}

TEST(LoopbackTransport, AnAbortFailsAnyPendingWaitNotOnlyOnTheAbortingPeer) {
  Event rank0_done;
  with_loopback(3, [&](LoopbackTransport& t) {
    if (t.rank() == 2) {
      t.abort("rank 2 saw a problem");
      return;
    }
    if (t.rank() == 1) {
      rank0_done.wait();  // stays in the group, silent, so only the abort can end rank 0's wait
      return;
    }
    Notify notify{rank0_done};
    int v = 0;
    t.post_recv(1, coll(1, 1), &v, 4);
    try {
      t.wait_all(Deadline(10000ms));
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer(), 2);
      EXPECT_NE(std::string(e.what()).find("rank 2 saw a problem"), std::string::npos) << e.what();
    }
  });
}

TEST(LoopbackTransport, PeerThatLeavesIsOnlyAnErrorIfSomethingIsOwed) {
  Event rank2_left;
  with_loopback(3, [&](LoopbackTransport& t) {
    if (t.rank() == 2) {
      Notify notify{rank2_left};
      int bye = 99;
      t.post_send(0, p2p(4, 1), &bye, 4);
      t.wait_all(Deadline(5000ms));
      t.close();
      return;
    }
    rank2_left.wait();
    // Ranks 0 and 1 keep talking after rank 2 left cleanly.
    int a = t.rank(), b = -1;
    t.post_send(1 - t.rank(), coll(1, 1), &a, 4);
    t.post_recv(1 - t.rank(), coll(1, 1), &b, 4);
    t.wait_all(Deadline(5000ms));
    EXPECT_EQ(b, 1 - t.rank());
    if (t.rank() == 1) {
      // Sending to a rank that left fails like writing to a closed socket.
      t.post_send(2, coll(2, 1), &a, 4);
      EXPECT_THROW(t.wait_all(Deadline(5000ms)), PeerError);
      return;
    }
    // What it sent before leaving is still delivered.
    int got = 0;
    t.post_recv(2, p2p(4, 1), &got, 4);
    t.wait_all(Deadline(5000ms));
    EXPECT_EQ(got, 99);
    // Now ask it for more: it is gone.
    t.post_recv(2, coll(2, 1), &b, 4);
    try {
      t.wait_all(Deadline(5000ms));
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer(), 2);
      EXPECT_NE(std::string(e.what()).find("rank 2 left the group"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("waited for 4 bytes of all_reduce #2"), std::string::npos) << e.what();
    }
  });
}

TEST(LoopbackTransport, ARankWaitingWhenItsPeerLeavesIsWoken) {
  with_loopback(2, [](LoopbackTransport& t) {
    if (t.rank() == 1) {
      t.close();
      return;
    }
    int v = 0;
    t.post_recv(1, coll(1, 1), &v, 4);
    const auto start = Clock::now();
    EXPECT_THROW(t.wait_all(Deadline(10000ms)), PeerError);
    EXPECT_LT(Clock::now() - start, 5000ms);
  });
}

}  // namespace
}  // namespace mci::transport
