// recv(data, mci::any_source, tag): whichever rank's matching send comes
// first, through the whole stack (front end, cpu backend, TCP transport).
// Ranks are threads, each with its own store client and group over real
// sockets; connections made on first use (the default) and at init.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mci/mci.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

// Each rank's result, or the text of what it threw.
std::vector<std::string> run(int world, const std::function<std::string(ProcessGroup&)>& body,
                             const std::string& connect = "lazy", std::chrono::milliseconds timeout = 20s) {
  std::vector<std::string> out(static_cast<std::size_t>(world));
  const auto errors = test::run_ranks(
      world, [&](std::shared_ptr<ProcessGroup> pg) { out[static_cast<std::size_t>(pg->rank())] = body(*pg); }, "cpu",
      timeout,
      [&](InitOptions& o) {
        o.settings = {{"MCI_CONNECT", connect}};
      });
  for (std::size_t r = 0; r < out.size(); ++r) {
    if (!errors[r].empty()) out[r] = "error: " + errors[r];
  }
  return out;
}

class AnySource : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Connect, AnySource, ::testing::Values("lazy", "eager"),
                         [](const auto& info) { return info.param; });

// Ranks 1 and 2 send one message each; rank 0's two receives from any
// source get both, each sender named once, blocking and async alike.
TEST_P(AnySource, TwoSendersEachMatchedOnceWithTheirSource) {
  const auto out = run(
      3,
      [](ProcessGroup& pg) -> std::string {
        const float me = static_cast<float>(pg.rank());
        if (pg.rank() != 0) {
          std::vector<float> a(4, me * 10), b(4, me * 10 + 1);
          pg.send(view(a), 0, 7);
          pg.send(view(b), 0, 8, Exec::async).wait();
          return "sent";
        }
        std::map<int, float> blocking, async;
        for (int k = 0; k < 2; ++k) {
          std::vector<float> buf(4, -1);
          const Work w = pg.recv(view(buf), any_source, 7);
          EXPECT_TRUE(w.is_success());
          EXPECT_EQ(w.op(), "recv");
          EXPECT_TRUE(blocking.emplace(w.source(), buf[3]).second) << "source " << w.source() << " twice";
        }
        std::vector<float> b1(4, -1), b2(4, -1);
        const Work w1 = pg.recv(view(b1), any_source, 8, Exec::async);
        const Work w2 = pg.recv(view(b2), any_source, 8, Exec::async);
        w1.wait();
        w2.wait();
        async[w1.source()] = b1[0];
        async[w2.source()] = b2[0];
        std::string s;
        for (const auto& [src, v] : blocking) s += fmt::format("{}:{} ", src, v);
        for (const auto& [src, v] : async) s += fmt::format("{}:{} ", src, v);
        return s;
      },
      GetParam());
  EXPECT_EQ(out[0], "1:10 2:20 1:11 2:21 ");
  EXPECT_EQ(out[1], "sent");
  EXPECT_EQ(out[2], "sent");
}

// From one sender, its sends in the order made: values 1 then 2.
TEST_P(AnySource, OneSendersMessagesComeInOrder) {
  const auto out = run(
      2,
      [](ProcessGroup& pg) -> std::string {
        if (pg.rank() == 1) {
          for (int v = 1; v <= 2; ++v) {
            std::vector<int> a(3, v);
            pg.send(view(a), 0, 7);
          }
          return "sent";
        }
        std::string s;
        for (int k = 0; k < 2; ++k) {
          std::vector<int> buf(3, -1);
          const Work w = pg.recv(view(buf), any_source, 7);
          s += fmt::format("{} from {}; ", buf[0], w.source());
        }
        return s;
      },
      GetParam());
  EXPECT_EQ(out[0], "1 from 1; 2 from 1; ");
  EXPECT_EQ(out[1], "sent");
}

// Two senders of two messages each: four receives from any source see each
// sender's messages in its order, however the two interleave.
TEST_P(AnySource, EachSendersOrderHoldsAcrossSenders) {
  const auto out = run(
      3,
      [](ProcessGroup& pg) -> std::string {
        if (pg.rank() != 0) {
          // Async sends read their buffers until done: both live to the end.
          std::vector<int> a(2, pg.rank() * 10 + 1), b(2, pg.rank() * 10 + 2);
          pg.send(view(a), 0, 3, Exec::async);
          pg.send(view(b), 0, 3, Exec::async);
          pg.barrier();  // the async sends are done before the group goes
          return "sent";
        }
        std::vector<std::vector<int>> bufs(4, std::vector<int>(2, -1));
        std::vector<Work> ws;
        for (auto& b : bufs) ws.push_back(pg.recv(view(b), any_source, 3, Exec::async));
        std::map<int, std::string> by_source;
        for (std::size_t k = 0; k < ws.size(); ++k) {
          ws[k].wait();
          by_source[ws[k].source()] += fmt::format("{} ", bufs[k][0]);
        }
        pg.barrier();
        std::string s;
        for (const auto& [src, vs] : by_source) s += fmt::format("{}: {}; ", src, vs);
        return s;
      },
      GetParam());
  EXPECT_EQ(out[0], "1: 11 12 ; 2: 21 22 ; ");
}

// A recv naming rank 1, posted before the receives from any source, takes
// rank 1's first message; a receive from any source takes only its tag.
TEST_P(AnySource, MixedWithARecvNamingItsSource) {
  const auto out = run(
      3,
      [](ProcessGroup& pg) -> std::string {
        if (pg.rank() == 1) {
          std::vector<float> t8(1, 8), a(1, 11), b(1, 12);
          pg.send(view(t8), 0, 8);
          pg.send(view(a), 0, 7);
          pg.send(view(b), 0, 7);
          return "sent";
        }
        if (pg.rank() == 2) {
          std::vector<float> a(1, 21);
          pg.send(view(a), 0, 7);
          return "sent";
        }
        // Tag 8 first: rank 1's tag 7 messages wait for their receives.
        std::vector<float> t8(1, -1);
        const Work w8 = pg.recv(view(t8), any_source, 8);
        std::vector<float> mine(1, -1), x(1, -1), y(1, -1);
        const Work wm = pg.recv(view(mine), 1, 7, Exec::async);
        const Work wx = pg.recv(view(x), any_source, 7, Exec::async);
        const Work wy = pg.recv(view(y), any_source, 7, Exec::async);
        for (const Work& w : {wm, wx, wy}) w.wait();
        std::map<int, float> any;
        any[wx.source()] = x[0];
        any[wy.source()] = y[0];
        return fmt::format("tag 8: {} from {}; named: {} from {}; any: 1:{} 2:{}", t8[0], w8.source(), mine[0],
                           wm.source(), any[1], any[2]);
      },
      GetParam());
  EXPECT_EQ(out[0], "tag 8: 8 from 1; named: 11 from 1; any: 1:12 2:21");
}

TEST(AnySourceErrors, ACountMismatchIsAMismatchErrorNamingBothRanks) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  const auto out = run(2, [&](ProcessGroup& pg) -> std::string {
    if (pg.rank() == 1) {
      std::vector<float> a(2, 1);
      pg.send(view(a), 0, 7);
      done.wait();  // alive until rank 0 has its answer
      return "sent";
    }
    std::vector<float> buf(1);
    std::string text;
    try {
      pg.recv(view(buf), any_source, 7);
      text = "no error";
    } catch (const MismatchError& e) {
      text = e.what();
    }
    rank0_done.set_value();
    return text;
  });
  EXPECT_NE(out[0].find("point-to-point mismatch between rank 0 and rank 1"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("(f32 x 1) (4 bytes) but rank 1 sent send tag 7 (f32 x 2) (8 bytes)"), std::string::npos)
      << out[0];
  EXPECT_EQ(out[1], "sent");
}

// Nobody sends: a TimeoutError at the group's timeout that names the
// receive from any source, with the hang report.
TEST_P(AnySource, NobodySendsTimesOutNamingIt) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  const auto out = run(
      3,
      [&](ProcessGroup& pg) -> std::string {
        if (pg.rank() != 0) {
          done.wait();  // alive and silent: a departure would be a PeerError
          return "";
        }
        std::vector<float> buf(4);
        const auto t0 = std::chrono::steady_clock::now();
        std::string text;
        try {
          pg.recv(view(buf), any_source, 7);
          text = "no error";
        } catch (const TimeoutError& e) {
          text = e.what();
        }
        const auto took = std::chrono::steady_clock::now() - t0;
        rank0_done.set_value();
        EXPECT_GE(took, 500ms);
        EXPECT_LT(took, 10s);
        return text;
      },
      GetParam(), 500ms);
  EXPECT_NE(out[0].find("Timed out waiting 500ms for recv tag 7 (f32 x 4) from any source on rank 0: no rank sent it"),
            std::string::npos)
      << out[0];
  EXPECT_NE(out[0].find("mci hang report for recv tag 7 (f32 x 4) from any source"), std::string::npos) << out[0];
}

// abort() fails a pending receive from any source at once, with its reason.
TEST(AnySourceErrors, AbortFailsItAtOnce) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  const auto out = run(2, [&](ProcessGroup& pg) -> std::string {
    if (pg.rank() == 1) {
      done.wait();
      return "";
    }
    std::vector<float> buf(4);
    const auto t0 = std::chrono::steady_clock::now();
    const Work w = pg.recv(view(buf), any_source, 7, Exec::async);
    pg.abort("the program is leaving");
    std::string text;
    try {
      w.wait();
      text = "no error";
    } catch (const Error& e) {
      text = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    EXPECT_EQ(w.source(), -1);
    rank0_done.set_value();
    return text;
  });
  EXPECT_NE(out[0].find("recv tag 7 (f32 x 4) from any source"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("aborted by the user: the program is leaving"), std::string::npos) << out[0];
}

// Work::source(): a recv's src, -1 for anything else.
TEST(AnySourceErrors, SourceIsTheRecvsSrcAndMinusOneOtherwise) {
  EXPECT_EQ(Work().source(), -1);
  const auto out = run(2, [](ProcessGroup& pg) -> std::string {
    std::vector<float> a(2, 1);
    if (pg.rank() == 1) {
      const Work w = pg.send(view(a), 0, 1);
      pg.all_reduce(view(a));
      return fmt::format("send {}", w.source());
    }
    const Work w = pg.recv(view(a), 1, 1);
    const Work r = pg.all_reduce(view(a));
    return fmt::format("recv {} all_reduce {}", w.source(), r.source());
  });
  EXPECT_EQ(out[0], "recv 1 all_reduce -1") << out[0];
  EXPECT_EQ(out[1], "send -1") << out[1];
}

// Misuse is refused before anything moves, with what to do instead.
TEST(AnySourceErrors, ASendToAnySourceAndOtherNegativePeersAreRefused) {
  const auto out = run(2, [](ProcessGroup& pg) -> std::string {
    if (pg.rank() == 1) return "";
    std::vector<float> a(2);
    std::string s;
    try {
      pg.send(view(a), any_source, 0);
    } catch (const ConfigError& e) {
      s += std::string(e.what()) + "\n";
    }
    try {
      pg.recv(view(a), -2, 0);
    } catch (const ConfigError& e) {
      s += e.what();
    }
    return s;
  });
  EXPECT_NE(out[0].find("invalid send on rank 0: destination rank -1 is any_source, which only a recv takes"),
            std::string::npos)
      << out[0];
  EXPECT_NE(out[0].find("invalid recv on rank 0: source rank -2 is out of range"), std::string::npos) << out[0];
}

TEST(AnySourceErrors, GlooRefusesItNamingWhatToDo) {
  if (!backend_available("gloo")) GTEST_SKIP() << "this build has no gloo backend";
  std::vector<std::string> out(2);
  const auto errors = test::run_ranks(
      2,
      [&](std::shared_ptr<ProcessGroup> pg) {
        if (pg->rank() == 1) return;
        std::vector<float> a(2);
        try {
          pg->recv(view(a), any_source, 0);
        } catch (const ConfigError& e) {
          out[0] = e.what();
        }
      },
      "gloo", 5s);
  EXPECT_NE(out[0].find("the gloo backend cannot receive from any source"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("pass src=<the sending rank>"), std::string::npos) << out[0];
}

}  // namespace
}  // namespace mci
