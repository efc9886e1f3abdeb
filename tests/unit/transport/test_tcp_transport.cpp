// The TCP mesh with one thread per rank in this process.
#include <gtest/gtest.h>

#include "support/fingerprints.hpp"

#include <sys/socket.h>

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

void with_mesh(int n, const std::function<void(TcpTransport&)>& body, const std::string& token = "") {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, token});
  const std::vector<std::string> errors = test::run_threads(n, [&](int r) {
    TcpStoreOptions o;
    o.port = server.port();
    o.token = token;
    TcpStore store(o);
    auto t = connect_tcp_mesh(store, r, n, "127.0.0.1", "test", token, Deadline(10000ms));
    body(*t);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

Fingerprint coll(std::uint64_t seq, std::uint64_t count) { return test::coll_fingerprint(seq, count); }

TEST(TcpTransport, EveryPairExchangesConcurrently) {
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

TEST(TcpTransport, WaitForOneOperationLeavesTheRestInFlight) {
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

TEST(TcpTransport, SizeOrFingerprintDisagreementIsAMismatch) {
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

TEST(TcpTransport, TimeoutNamesTheSilentPeerAndTheBudget) {
  with_mesh(2, [](TcpTransport& t) {
    if (t.rank() == 0) {
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
    }
    std::this_thread::sleep_for(500ms);
  });
}

TEST(TcpTransport, AbortReasonReachesThePeers) {
  with_mesh(3, [](TcpTransport& t) {
    if (t.rank() == 2) {
      t.abort("rank 2 gave up: testing");
      return;
    }
    int v;
    t.post_recv(2, coll(1, 1), &v, 4);
    try {
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

TEST(TcpTransport, PeerThatLeavesNormallyIsOnlyAnErrorIfSomethingIsOwed) {
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

TEST(TcpTransport, StashedPointToPointFramesWaitForTheirRecv) {
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

TEST(TcpMesh, WrongTokenCannotJoinAndAStrangerIsIgnored) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  std::string err0, err1;
  std::thread r0([&] {
    try {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore store(o);
      auto t = connect_tcp_mesh(store, 0, 2, "127.0.0.1", "s", "tok", Deadline(1500ms));
    } catch (const std::exception& e) {
      err0 = e.what();
    }
  });
  std::thread r1([&] {
    try {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore store(o);
      // A stranger connects first and sends garbage.
      const std::string addr = to_string(store.get("tcp/addr/0"));
      const auto colon = addr.rfind(':');
      Fd s = connect_tcp("127.0.0.1", std::stoi(addr.substr(colon + 1)), Deadline(1000ms), "r0");
      const char junk[100] = "hello, I am not an mci rank";
      (void)send_all(s.get(), junk, sizeof junk, Deadline(1000ms));
      auto t = connect_tcp_mesh(store, 1, 2, "127.0.0.1", "s", "other-token", Deadline(1500ms));
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  r0.join();
  r1.join();
  EXPECT_NE(err0.find("Timed out waiting"), std::string::npos) << err0;
  EXPECT_NE(err1, "") << "a rank with the wrong token joined";
}

}  // namespace
}  // namespace mci::transport
