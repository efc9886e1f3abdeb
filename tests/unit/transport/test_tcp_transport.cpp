// The TCP mesh with one thread per rank in this process, connected at init
// (eager) and on first use (lazy): every behaviour below holds in both.
#include <gtest/gtest.h>

#include "support/fingerprints.hpp"

#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <thread>

#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "support/thread_ranks.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace mci::transport {
namespace {

using namespace std::chrono_literals;

void with_mesh(int n, const std::function<void(TcpTransport&)>& body, const std::string& token = "",
               ConnectMode mode = ConnectMode::eager) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, token});
  const std::vector<std::string> errors = test::run_threads(n, [&](int r) {
    TcpStoreOptions o;
    o.port = server.port();
    o.token = token;
    TcpStore store(o);
    auto t = connect_tcp_mesh(store, r, n, "127.0.0.1", "test", token, Deadline(10000ms), {}, mode);
    body(*t);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class TcpTransportModes : public ::testing::TestWithParam<ConnectMode> {
 protected:
  void with_mesh(int n, const std::function<void(TcpTransport&)>& body, const std::string& token = "") {
    transport::with_mesh(n, body, token, GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(Connect, TcpTransportModes, ::testing::Values(ConnectMode::eager, ConnectMode::lazy),
                         [](const auto& info) { return info.param == ConnectMode::eager ? "eager" : "lazy"; });

using test::coll;
using test::p2p;

TEST_P(TcpTransportModes, EveryPairExchangesConcurrently) {
  with_mesh(4, [](TcpTransport& t) {
    const int n = t.size(), r = t.rank();
    std::vector<std::vector<int>> in(n, std::vector<int>(300000)), out(n, std::vector<int>(300000));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (auto& x : in[p]) x = r * 100 + p;
      t.post_send(p, coll(1, 300000), in[p].data(), in[p].size() * 4);
      t.post_recv(p, coll(1, 300000), out[p].data(), out[p].size() * 4);
    }
    t.wait_all(Deadline(10000ms));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (int x : out[p]) ASSERT_EQ(x, p * 100 + r);
    }
  });
}

TEST_P(TcpTransportModes, WaitForOneOperationLeavesTheRestInFlight) {
  with_mesh(2, [](TcpTransport& t) {
    const int peer = 1 - t.rank();
    int a = 1 + t.rank(), b = 10 + t.rank(), ra = 0, rb = 0;
    t.post_send(peer, coll(1, 1), &a, 4);
    t.post_send(peer, coll(1, 1), &b, 4);
    auto h1 = t.post_recv(peer, coll(1, 1), &ra, 4);
    t.post_recv(peer, coll(1, 1), &rb, 4);
    t.wait(h1, Deadline(5000ms));
    EXPECT_EQ(ra, 1 + peer);
    t.wait_all(Deadline(5000ms));
    EXPECT_EQ(rb, 10 + peer);
  });
}

TEST_P(TcpTransportModes, SizeOrFingerprintDisagreementIsAMismatch) {
  with_mesh(2, [](TcpTransport& t) {
    int v = 0;
    if (t.rank() == 0) {
      t.post_send(1, coll(1, 2), &v, 4);
      try {
        t.wait_all(Deadline(3000ms));
      } catch (const PeerError&) {
        // rank 1 aborted after seeing the mismatch: also fine for the sender
      }
    } else {
      t.post_recv(0, coll(1, 1), &v, 4);
      try {
        t.wait_all(Deadline(3000ms));
        ADD_FAILURE() << "no mismatch";
      } catch (const MismatchError& e) {
        EXPECT_NE(std::string(e.what()).find("all_reduce #1 (f32 x 1, sum)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("all_reduce #1 (f32 x 2, sum)"), std::string::npos) << e.what();
      }
      t.abort("mismatch");
    }
  });
}

// Rank 1 stays alive and silent until rank 0 has its answer: its leaving
// would be a PeerError, not the timeout under test.
void stay_until(const std::atomic<bool>& done) {
  const auto limit = Clock::now() + 60s;
  while (!done && Clock::now() < limit) std::this_thread::sleep_for(5ms);
}

TEST_P(TcpTransportModes, TimeoutNamesTheSilentPeerAndTheBudget) {
  std::atomic<bool> done{false};
  with_mesh(2, [&](TcpTransport& t) {
    if (t.rank() == 1) return stay_until(done);
    int v;
    t.post_recv(1, coll(5, 1), &v, 4);
    try {
      t.wait_all(Deadline(300ms));
      ADD_FAILURE();
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Timed out waiting 300ms for all_reduce #5"), std::string::npos) << m;
      EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
    }
    done = true;
  });
}

// An abort reaches the peers this rank is connected to (lazy: those it has
// talked to; the others find it gone when they connect, see below).
TEST_P(TcpTransportModes, AbortReasonReachesThePeers) {
  with_mesh(3, [](TcpTransport& t) {
    int hello = t.rank(), got[3] = {};
    for (int p = 0; p < 3; ++p) {
      if (p == t.rank()) continue;
      t.post_send(p, coll(1, 1), &hello, 4);
      t.post_recv(p, coll(1, 1), &got[p], 4);
    }
    t.wait_all(Deadline(5000ms));
    // Rank 2 aborts once both others are ready to hear it.
    if (t.rank() == 2) {
      t.post_recv(0, coll(2, 1), &got[0], 4);
      t.post_recv(1, coll(2, 1), &got[1], 4);
      t.wait_all(Deadline(5000ms));
      t.abort("rank 2 gave up: testing");
      return;
    }
    int v;
    try {
      t.post_send(2, coll(2, 1), &hello, 4);
      t.post_recv(2, coll(3, 1), &v, 4);
      t.wait_all(Deadline(5000ms));
      ADD_FAILURE();
    } catch (const PeerError& e) {
      // Rank 2's own abort, or the other survivor relaying it in its abort.
      EXPECT_TRUE(e.peer() == 2 || e.peer() == 1 - t.rank()) << e.peer();
      EXPECT_NE(std::string(e.what()).find("rank 2 gave up: testing"), std::string::npos) << e.what();
      t.abort(e.what());
    }
  });
}

TEST_P(TcpTransportModes, PeerThatLeavesNormallyIsOnlyAnErrorIfSomethingIsOwed) {
  with_mesh(3, [](TcpTransport& t) {
    if (t.rank() == 2) {
      t.close();
      return;
    }
    // Ranks 0 and 1 keep talking after rank 2 left cleanly.
    std::this_thread::sleep_for(100ms);
    int a = t.rank(), b = -1;
    t.post_send(1 - t.rank(), coll(1, 1), &a, 4);
    t.post_recv(1 - t.rank(), coll(1, 1), &b, 4);
    t.wait_all(Deadline(5000ms));
    EXPECT_EQ(b, 1 - t.rank());
    // Now ask rank 2 for data: it is gone.
    t.post_recv(2, coll(2, 1), &b, 4);
    EXPECT_THROW(t.wait_all(Deadline(5000ms)), PeerError);
  });
}

TEST_P(TcpTransportModes, StashedPointToPointFramesWaitForTheirRecv) {
  with_mesh(2, [](TcpTransport& t) {
    Fingerprint p2p;
    p2p.kind = OpKind::send;
    p2p.count = 1;
    if (t.rank() == 0) {
      int x = 7, y = 8;
      p2p.seq = 1;
      t.post_send(1, p2p, &x, 4);
      p2p.seq = 2;
      t.post_send(1, p2p, &y, 4);
      t.wait_all(Deadline(5000ms));
    } else {
      int got = 0;
      p2p.seq = 2;
      t.post_recv(0, p2p, &got, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got, 8);
      p2p.seq = 1;
      t.post_recv(0, p2p, &got, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got, 7);
    }
  });
}

// Receives from any source: whichever peer's matching frame comes first, in
// both modes (lazy: the senders connect to the receiver on their first send).

TEST_P(TcpTransportModes, AnySourceTakesEachSendersFrameOnceAndNamesItsSource) {
  with_mesh(3, [](TcpTransport& t) {
    if (t.rank() != 0) {
      int v = t.rank() * 10;
      t.post_send(0, p2p(7), &v, 4);
      t.wait_all(Deadline(5000ms));
      return;
    }
    int a = -1, b = -1;
    const OpHandle ha = t.post_recv_any(p2p(7), &a, 4);
    const OpHandle hb = t.post_recv_any(p2p(7), &b, 4);
    EXPECT_EQ(ha.peer, kAnyPeer);
    t.wait(ha, Deadline(5000ms));
    t.wait(hb, Deadline(5000ms));
    const int sa = t.source(ha), sb = t.source(hb);
    EXPECT_EQ(std::min(sa, sb), 1);
    EXPECT_EQ(std::max(sa, sb), 2);
    EXPECT_EQ(a, sa * 10);
    EXPECT_EQ(b, sb * 10);
  });
}

// From one sender, its frames of a tag in the order sent, whether they
// arrive before the receives (stashed) or after (read into them).
TEST_P(TcpTransportModes, AnySourceTakesOneSendersFramesInOrder) {
  with_mesh(2, [](TcpTransport& t) {
    int go = 0;
    if (t.rank() == 1) {
      int v[5] = {1, 100, 2, 3, 4};
      for (int round = 0; round < 2; ++round) {
        // Round 0: rank 0 asks for them only after the last frame (tag 9)
        // came. Round 1: rank 0's receives are posted before rank 1 sends.
        if (round == 1) {
          t.post_recv(0, p2p(5), &go, 4);
          t.wait_all(Deadline(5000ms));
        }
        t.post_send(0, p2p(7), &v[0], 4);
        t.post_send(0, p2p(8), &v[1], 4);
        t.post_send(0, p2p(7), &v[2], 4);
        t.post_send(0, p2p(7), &v[3], 4);
        t.post_send(0, p2p(9), &v[4], 4);
        t.wait_all(Deadline(5000ms));
      }
      return;
    }
    for (int round = 0; round < 2; ++round) {
      int got[3] = {-1, -1, -1}, other = -1, last = -1;
      if (round == 0) {
        t.post_recv(1, p2p(9), &last, 4);
        t.wait_all(Deadline(5000ms));
      }
      OpHandle h[3];
      for (int k = 0; k < 3; ++k) h[k] = t.post_recv_any(p2p(7), &got[k], 4);
      if (round == 1) {
        t.post_send(1, p2p(5), &go, 4);
        t.post_recv(1, p2p(9), &last, 4);
      }
      for (const auto& op : h) t.wait(op, Deadline(5000ms));
      for (const auto& op : h) EXPECT_EQ(t.source(op), 1);
      t.post_recv_any(p2p(8), &other, 4);
      t.wait_all(Deadline(5000ms));
      EXPECT_EQ(got[0], 1) << "round " << round;
      EXPECT_EQ(got[1], 2) << "round " << round;
      EXPECT_EQ(got[2], 3) << "round " << round;
      EXPECT_EQ(other, 100) << "round " << round;
      EXPECT_EQ(last, 4) << "round " << round;
    }
  });
}

// A receive posted for rank 1 before the one from any source has the first
// claim on rank 1's frames, whenever they arrive.
TEST_P(TcpTransportModes, AnEarlierReceiveForThePeerHasTheFirstClaim) {
  with_mesh(3, [](TcpTransport& t) {
    if (t.rank() != 0) {
      int v[2] = {t.rank() * 10 + 1, t.rank() * 10 + 2};
      t.post_send(0, p2p(7), &v[0], 4);
      if (t.rank() == 1) t.post_send(0, p2p(7), &v[1], 4);
      t.wait_all(Deadline(5000ms));
      return;
    }
    int mine = -1, a = -1, b = -1;
    const OpHandle hr = t.post_recv(1, p2p(7), &mine, 4);
    const OpHandle ha = t.post_recv_any(p2p(7), &a, 4);
    const OpHandle hb = t.post_recv_any(p2p(7), &b, 4);
    for (const auto& op : {hr, ha, hb}) t.wait(op, Deadline(5000ms));
    EXPECT_EQ(mine, 11);
    EXPECT_EQ(t.source(hr), 1);
    // The other two: rank 1's second and rank 2's, in either order.
    EXPECT_EQ(a, t.source(ha) == 1 ? 12 : 21);
    EXPECT_EQ(b, t.source(hb) == 1 ? 12 : 21);
    EXPECT_NE(t.source(ha), t.source(hb));
  });
}

// Receives are matched in the order posted: one from any source posted
// before a receive for rank 1 takes rank 1's first frame.
TEST_P(TcpTransportModes, AnAnySourceReceivePostedFirstIsMatchedFirst) {
  with_mesh(2, [](TcpTransport& t) {
    int go = 0;
    if (t.rank() == 1) {
      t.post_recv(0, p2p(5), &go, 4);  // both receives are posted before rank 1 sends
      t.wait_all(Deadline(5000ms));
      int v[2] = {1, 2};
      t.post_send(0, p2p(7), &v[0], 4);
      t.post_send(0, p2p(7), &v[1], 4);
      t.wait_all(Deadline(5000ms));
      return;
    }
    int any = -1, mine = -1;
    const OpHandle ha = t.post_recv_any(p2p(7), &any, 4);
    const OpHandle hr = t.post_recv(1, p2p(7), &mine, 4);
    t.post_send(1, p2p(5), &go, 4);
    t.wait(ha, Deadline(5000ms));
    t.wait(hr, Deadline(5000ms));
    EXPECT_EQ(any, 1);
    EXPECT_EQ(t.source(ha), 1);
    EXPECT_EQ(mine, 2);
  });
}

TEST_P(TcpTransportModes, AnySourceCountDisagreementIsAMismatchNamingBothRanks) {
  with_mesh(2, [](TcpTransport& t) {
    int v[2] = {1, 2};
    if (t.rank() == 1) {
      t.post_send(0, p2p(7, 2), v, 8);
      t.wait_all(Deadline(5000ms));
      return;
    }
    t.post_recv_any(p2p(7, 1), v, 4);
    try {
      t.wait_all(Deadline(5000ms));
      ADD_FAILURE() << "no mismatch";
    } catch (const MismatchError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("point-to-point mismatch between rank 0 and rank 1"), std::string::npos) << m;
      EXPECT_NE(m.find("(i32 x 2) (8 bytes)"), std::string::npos) << m;
    }
    t.abort("mismatch");
  });
}

TEST_P(TcpTransportModes, AnySourceTimeoutSaysNoRankSentIt) {
  std::atomic<bool> done{false};
  with_mesh(2, [&](TcpTransport& t) {
    if (t.rank() == 1) return stay_until(done);
    int v = 0;
    t.post_recv_any(p2p(7), &v, 4);
    try {
      t.wait_all(Deadline(300ms));
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Timed out waiting 300ms for recv tag 7 (i32 x 1) from any source on rank 0: no rank sent it"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("waiting for 4 bytes of tag 7 from any rank"), std::string::npos) << m;
    }
    done = true;
  });
}

// Once every other rank has left, nobody can send: a PeerError at once,
// not the timeout.
TEST_P(TcpTransportModes, AnySourceFailsAtOnceWhenEveryOtherRankHasLeft) {
  with_mesh(3, [](TcpTransport& t) {
    int hello = t.rank(), got = -1;
    if (t.rank() != 0) {
      // Connected (lazy mode too) and then gone.
      t.post_send(0, p2p(1), &hello, 4);
      t.wait_all(Deadline(5000ms));
      return;
    }
    for (int k = 0; k < 2; ++k) t.post_recv_any(p2p(1), &got, 4);
    t.wait_all(Deadline(5000ms));
    const auto t0 = Clock::now();
    t.post_recv_any(p2p(7), &got, 4);
    try {
      t.wait_all(Deadline(60000ms));
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("every other rank left the group"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("recv tag 7 (i32 x 1) from any source"), std::string::npos) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, 30s);
  });
}

// Eager: rank 0 waits at init for a rank 1 that cannot prove the token.
// Lazy: each dials the other on first use. Either way a stranger's junk is
// closed on at once, the wrong token never joins, and both ranks stop.
TEST_P(TcpTransportModes, AStrangerIsRefusedAndAWrongTokenCannotJoin) {
  const ConnectMode mode = GetParam();
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  std::string err0, err1;
  std::thread r0([&] {
    try {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore store(o);
      auto t = connect_tcp_mesh(store, 0, 2, "127.0.0.1", "s", "tok", Deadline(1500ms), {}, mode);
      int v = 0;
      t->post_recv(1, coll(1, 1), &v, 4);
      t->wait_all(Deadline(1500ms));
    } catch (const std::exception& e) {
      err0 = e.what();
    }
  });
  std::thread r1([&] {
    try {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore store(o);
      // A stranger connects first and sends junk: rank 0 closes on it
      // (well before the 10 s a silent stranger is given).
      const std::string addr = to_string(store.get("tcp/addr/0"));
      const auto colon = addr.rfind(':');
      Fd s = connect_tcp("127.0.0.1", std::stoi(addr.substr(colon + 1)), Deadline(1000ms), "r0");
      char junk[200] = "hello, I am not an mci rank";
      (void)send_all(s.get(), junk, sizeof junk, Deadline(1000ms));
      Io io;
      while ((io = recv_all(s.get(), junk, 1, Deadline(5000ms))) == Io::ok) {
      }
      EXPECT_NE(io, Io::timeout) << "rank 0 kept a stranger's connection open";
      auto t = connect_tcp_mesh(store, 1, 2, "127.0.0.1", "s", "other-token", Deadline(1500ms), {}, mode);
      int v = 1;
      t->post_send(0, coll(1, 1), &v, 4);
      t->wait_all(Deadline(5000ms));
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  r0.join();
  r1.join();
  EXPECT_NE(err0, "");
  EXPECT_NE(err1, "");
  EXPECT_NE((err0 + err1).find("different job token or group"), std::string::npos) << err0 << "\n" << err1;
  if (mode == ConnectMode::eager) {
    EXPECT_NE(err0.find("Timed out waiting"), std::string::npos) << err0;
  }
}

// Lazy connections: made on first use, one per pair whoever dials first,
// with the same errors as at init.

void with_lazy_mesh(int n, const std::function<void(TcpTransport&)>& body, const std::string& token = "") {
  with_mesh(n, body, token, ConnectMode::lazy);
}

TEST(TcpLazy, ARingConnectsOnlyItsNeighbours) {
  with_lazy_mesh(8, [](TcpTransport& t) {
    EXPECT_EQ(t.connections(), 0u);
    const int n = t.size(), r = t.rank();
    int out = r, in = -1;
    t.post_send((r + 1) % n, coll(1, 1), &out, 4);
    t.post_recv((r + n - 1) % n, coll(1, 1), &in, 4);
    t.wait_all(Deadline(10000ms));
    EXPECT_EQ(in, (r + n - 1) % n);
    EXPECT_EQ(t.connections(), 2u);
  });
}

// Every rank dials every other at the same moment, both ways: each pair
// still ends with one connection, and the data arrives in order over it.
TEST(TcpLazy, SimultaneousFirstUseBothWaysMakesOneConnectionPerPair) {
  with_lazy_mesh(
      6,
      [](TcpTransport& t) {
        const int n = t.size(), r = t.rank();
        for (std::uint64_t round = 1; round <= 3; ++round) {
          std::vector<int> in(n, -1), out(n);
          for (int p = 0; p < n; ++p) {
            if (p == r) continue;
            out[p] = static_cast<int>(round) * 100 + r;
            t.post_send(p, coll(round, 1), &out[p], 4);
            t.post_recv(p, coll(round, 1), &in[p], 4);
          }
          t.wait_all(Deadline(10000ms));
          for (int p = 0; p < n; ++p) {
            if (p != r) {
              ASSERT_EQ(in[p], static_cast<int>(round) * 100 + p) << "round " << round;
            }
          }
        }
        EXPECT_EQ(t.connections(), static_cast<std::size_t>(n - 1));
      },
      "tok");
}

TEST(TcpLazy, APeerThatNeverAnswersIsNamedAtTheDeadline) {
  std::atomic<bool> published{false}, done{false};
  with_lazy_mesh(2, [&](TcpTransport& t) {
    if (t.rank() == 1) {
      published = true;         // its address is in the store
      return stay_until(done);  // alive, listening, but never inside mci
    }
    stay_until(published);
    int v = 0;
    t.post_recv(1, coll(3, 1), &v, 4);
    try {
      t.wait_all(Deadline(400ms));
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Timed out waiting 400ms for all_reduce #3"), std::string::npos) << m;
      EXPECT_NE(m.find("handshake with rank 1"), std::string::npos) << m;
    }
    done = true;
  });
}

TEST(TcpLazy, ADeadPeerOnFirstUseIsAPeerErrorNotAHang) {
  with_lazy_mesh(3, [](TcpTransport& t) {
    if (t.rank() == 2) {
      t.abort("rank 2 stops before anyone talked to it");
      return;
    }
    // Whether rank 2 is gone before the dial (refused) or during the
    // handshake (closed), the survivors learn it from the connection, long
    // before the deadline: a PeerError, not a TimeoutError.
    int v = 0;
    t.post_recv(2, coll(1, 1), &v, 4);
    try {
      t.wait_all(Deadline(60000ms));
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer(), 2);
      EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
    }
  });
}

// The eager mode's check at init names the rank that never came.
TEST(TcpEager, ARankThatNeverConnectsIsNamedAtInit) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  TcpStoreOptions o;
  o.port = server.port();
  TcpStore store(o);
  try {
    auto t = connect_tcp_mesh(store, 0, 3, "127.0.0.1", "s", "", Deadline(300ms), {}, ConnectMode::eager);
    ADD_FAILURE() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("for ranks 1, 2 to connect to rank 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mci::transport
