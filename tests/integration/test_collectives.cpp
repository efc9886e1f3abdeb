// Every collective, every dtype, world sizes 1-4, checked element by element
// in real processes over real sockets; each forced algorithm too.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../support/job.hpp"
#include "../support/matrix.hpp"
#include "../support/rank.hpp"
#include "collectives/algorithm_table.hpp"

namespace mci::test {
namespace {

int run_matrix_scenario(bool quick) {
  auto pg = join();
  mci::test::MatrixConfig cfg;
  if (quick) {
    cfg.bytes = {(3u << 20) + 12};  // several pipeline chunks, blocks of odd sizes
    cfg.dtypes = {DType::f32, DType::bf16, DType::i32};
  }
  int failures = mci::test::run_matrix(*pg, cfg, std::cout);
  std::cout << fmt::format("rank {} matrix done: {} failures, {} collectives\n", pg->rank(), failures, pg->last_seq())
            << std::flush;
  return failures == 0 ? 0 : 1;
}

MCI_SCENARIO(matrix) { return run_matrix_scenario(false); }
MCI_SCENARIO(matrix_quick) { return run_matrix_scenario(true); }

// Async calls run in order while the caller computes; each Work has a time.
MCI_SCENARIO(async) {
  auto pg = join();
  const int n = pg->size();
  std::vector<std::vector<float>> bufs(6, std::vector<float>(100000));
  std::vector<mci::Work> works;
  for (std::size_t k = 0; k < bufs.size(); ++k) {
    for (auto& x : bufs[k]) x = static_cast<float>(pg->rank() + k);
    works.push_back(pg->all_reduce(mci::view(bufs[k]), mci::ReduceOp::sum, Exec::async));
  }
  // Compute while the collectives run.
  double acc = 0;
  for (int i = 0; i < 2000000; ++i) acc += i * 1e-9;
  for (std::size_t k = 0; k < works.size(); ++k) {
    works[k].wait();
    if (!works[k].is_completed() || !works[k].is_success()) return 1;
    if (works[k].seq() != k + 1) {
      say(fmt::format("work {} has seq {}", k, works[k].seq()));
      return 1;
    }
    const float want = static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(k));
    for (float x : bufs[k]) {
      if (x != want) {
        say(fmt::format("async all_reduce {} gave {} instead of {}", k, x, want));
        return 1;
      }
    }
  }
  // A blocking call after async ones waits for them and keeps the order.
  std::vector<float> last{1.0f};
  auto w1 = pg->all_reduce(mci::view(last), mci::ReduceOp::sum, Exec::async);
  pg->barrier();
  if (!w1.is_completed() || last[0] != static_cast<float>(n)) return 1;
  say(fmt::format("async ok ({:.0f})", acc));
  return 0;
}

// Receives match sends by tag, not by arrival order.
MCI_SCENARIO(p2p_tags) {
  auto pg = join();
  if (pg->size() < 2) return 1;
  if (pg->rank() == 0) {
    for (int tag : {1, 2, 3}) {
      std::vector<std::int32_t> v(5, tag * 10);
      pg->send(mci::view(v), 1, tag);
    }
  } else if (pg->rank() == 1) {
    for (int tag : {3, 1, 2}) {
      std::vector<std::int32_t> v(5, -1);
      pg->recv(mci::view(v), 0, tag);
      for (auto x : v) {
        if (x != tag * 10) {
          say(fmt::format("recv tag {} got {}", tag, x));
          return 1;
        }
      }
    }
  }
  pg->barrier();
  say("p2p ok");
  return 0;
}

// Every rank sends a large buffer to its right neighbour and receives one
// from its left with async calls: they must progress together, whatever the
// order and size (a serial queue would deadlock once socket buffers fill).
MCI_SCENARIO(p2p_exchange) {
  auto pg = join();
  const int n = pg->size(), r = pg->rank();
  const std::size_t count = 8u << 20;  // 32 MiB of floats each way
  std::vector<float> out(count, static_cast<float>(r)), in(count, -1.0f);
  auto ws = pg->send(mci::view(out), (r + 1) % n, 5, Exec::async);
  auto wr = pg->recv(mci::view(in), (r + n - 1) % n, 5, Exec::async);
  wr.wait();
  ws.wait();
  for (float x : in) {
    if (x != static_cast<float>((r + n - 1) % n)) {
      say(fmt::format("rank {} received {}", r, x));
      return 1;
    }
  }
  // A collective queued after point-to-point work runs after it.
  std::vector<float> one{1.0f};
  auto w2 = pg->send(mci::view(out), (r + 1) % n, 6, Exec::async);
  auto w3 = pg->recv(mci::view(in), (r + n - 1) % n, 6, Exec::async);
  auto w4 = pg->all_reduce(mci::view(one), mci::ReduceOp::sum, Exec::async);
  w4.wait();
  if (!w2.is_completed() || !w3.is_completed() || one[0] != static_cast<float>(n)) return 1;
  say("exchange ok");
  return 0;
}

// Each rank posts its async recv before its async send, around a ring (at
// 2 ranks both to the same peer): every rank waits in a recv whose send its
// peer has not posted yet, so they complete only if posted sends and recvs
// progress side by side. On gloo they used to run one after the other and
// every rank waited for its timeout (found by the fault matrix, issue 51).
MCI_SCENARIO(p2p_recv_first) {
  auto pg = join();
  const int n = pg->size(), r = pg->rank();
  std::vector<float> out(1u << 18, static_cast<float>(r)), in(1u << 18, -1.0f);
  for (int round = 0; round < 3; ++round) {
    auto wr = pg->recv(mci::view(in), (r + n - 1) % n, 7, Exec::async);
    auto ws = pg->send(mci::view(out), (r + 1) % n, 7, Exec::async);
    wr.wait();
    ws.wait();
    for (float x : in) {
      if (x != static_cast<float>((r + n - 1) % n)) {
        say(fmt::format("rank {} received {} in round {}", r, x, round));
        return 1;
      }
    }
    std::fill(in.begin(), in.end(), -1.0f);
  }
  say("recv first ok");
  return 0;
}

// The worker's "algorithms:" line: which algorithms each collective ran with.
std::string algorithms_of(const std::string& kind, const std::string& out) {
  const auto line = out.find("algorithms:");
  if (line == std::string::npos) return "(no algorithms line)";
  const std::string key = " " + kind + "=";
  const auto at = out.find(key, line);
  if (at == std::string::npos || at > out.find('\n', line)) return "(not run)";
  const auto begin = at + key.size();
  return out.substr(begin, out.find_first_of(" \n", begin) - begin);
}

struct Case {
  int world;
  std::string algo;
  std::string transport = "";
  // Pretend hosts (MCI_HOST_ID of each rank, comma-separated): several
  // hosts make every collective hierarchical.
  std::string hosts = "";
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "world " << c.world << " algo " << (c.algo.empty() ? "auto" : c.algo) << " transport "
      << (c.transport.empty() ? "auto" : c.transport) << (c.hosts.empty() ? "" : " hosts " + c.hosts);
}

class Matrix : public ::testing::TestWithParam<Case> {};

TEST_P(Matrix, EveryCollectiveEveryDtypeMatchesReference) {
  const Case c = GetParam();
  std::map<std::string, std::string> env;
  if (!c.algo.empty()) env["MCI_ALGO"] = c.algo;
  if (!c.transport.empty()) env["MCI_TRANSPORT"] = c.transport;
  if (!c.hosts.empty()) {
    env["MCI_TEST_HOSTS"] = c.hosts;
    env["MCI_LOG_LEVEL"] = "info";
  }
  const bool full = c.algo.empty() && c.world <= 4;
  Job job(c.world, Scenario{full ? "matrix" : "matrix_quick"}, env);
  job.wait(std::chrono::seconds(240));
  for (int r = 0; r < c.world; ++r) {
    const auto st = job.status(r);
    EXPECT_TRUE(st.exited && st.code == 0) << "rank " << r << " code " << st.code << " sig " << st.sig << "\n"
                                           << job.all_output();
    EXPECT_NE(job.output(r).find("matrix done: 0 failures"), std::string::npos) << job.output(r);
    // The algorithms that ran are the ones chosen or forced.
    const std::string& out = job.output(r);
    if (!c.algo.empty() && c.world > 1) {
      const Algo forced = *algo_from_name(c.algo);
      for (const auto& row : coll::algorithm_table()) {
        if (row.algo == forced && row.place == coll::Place::mesh) {
          EXPECT_EQ(algorithms_of(std::string(op_name(row.kind)), out), c.algo) << out;
        }
      }
    } else if (!c.hosts.empty()) {
      EXPECT_NE(out.find("collectives are hierarchical"), std::string::npos) << out;
      for (const char* kind :
           {"all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "barrier"}) {
        EXPECT_EQ(algorithms_of(kind, out), "hierarchical") << kind << "\n" << out;
      }
      // Large all-to-all blocks go straight between ranks (select.hpp).
      EXPECT_EQ(algorithms_of("all_to_all", out), "hierarchical+pairwise") << out;
    } else if (c.transport == "tcp" || c.world == 1) {
      EXPECT_EQ(algorithms_of("all_reduce", out), "recursive_doubling+ring") << out;
      EXPECT_EQ(algorithms_of("all_to_all", out), "pairwise") << out;
    } else {
      EXPECT_EQ(algorithms_of("all_reduce", out), "shm_direct+shm_sliced") << out;
      EXPECT_EQ(algorithms_of("barrier", out), "shm_flags") << out;
      EXPECT_EQ(algorithms_of("gather", out), "shm_staged") << out;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Matrix,
                         // Every rank of these jobs is on this host: "auto" is
                         // shared memory; "tcp" and the forced TCP algorithms
                         // (ring, recursive_doubling) cover the TCP suite.
                         ::testing::Values(Case{1, ""}, Case{2, ""}, Case{3, ""}, Case{4, ""}, Case{5, "", "shm"},
                                           Case{2, "", "tcp"}, Case{3, "", "tcp"}, Case{4, "", "tcp"}, Case{2, "ring"},
                                           Case{3, "ring"}, Case{4, "ring"}, Case{3, "recursive_doubling"},
                                           Case{4, "recursive_doubling"}, Case{3, "direct", "tcp"},
                                           Case{4, "direct", "tcp"}, Case{3, "direct"},
                                           // Hosts of 2+2, 1+2 and 2+3 ranks (interleaved), and
                                           // a forced TCP algorithm across hosts.
                                           Case{4, "", "", "a,a,b,b"}, Case{3, "", "", "a,b,b"},
                                           Case{5, "", "", "a,b,a,b,b"}, Case{4, "ring", "", "a,b,a,b"}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world) +
                                  (info.param.algo.empty() ? std::string("_auto") : "_" + info.param.algo) +
                                  (info.param.transport.empty() ? std::string() : "_" + info.param.transport) +
                                  (info.param.hosts.empty() ? std::string() : "_hosts_" + [&] {
                                    std::string h = info.param.hosts;
                                    std::erase(h, ',');
                                    return h;
                                  }());
                         });

TEST(Async, CallsOverlapComputeAndCompleteInOrder) {
  for (int world : {2, 3}) {
    Job job(world, Scenario{"async"});
    job.wait();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("async ok"), std::string::npos) << job.output(r);
    }
  }
}

TEST(PointToPoint, ReceivesMatchSendsByTagNotArrivalOrder) {
  Job job(3, Scenario{"p2p_tags"});
  job.wait();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.status(r).code, 0) << job.all_output();
}

TEST(PointToPoint, AsyncSendAndRecvOfLargeBuffersProgressTogether) {
  for (int world : {2, 3}) {
    Job job(world, Scenario{"p2p_exchange"}, {{"MCI_TEST_TIMEOUT_MS", "60000"}});
    job.wait(std::chrono::seconds(90));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("exchange ok"), std::string::npos) << job.output(r);
    }
  }
}

TEST(PointToPoint, AsyncRecvPostedBeforeItsSendCompletes) {
  for (int world : {2, 3}) {
    Job job(world, Scenario{"p2p_recv_first"}, {{"MCI_TEST_TIMEOUT_MS", "10000"}});
    job.wait(std::chrono::seconds(60));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("recv first ok"), std::string::npos) << job.output(r);
    }
  }
}

}  // namespace
}  // namespace mci::test
