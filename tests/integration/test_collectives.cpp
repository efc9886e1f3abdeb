// Every collective, every dtype, world sizes 1-4, checked element by element
// in real processes over real sockets; each forced algorithm too.
#include <gtest/gtest.h>

#include <regex>

#include "../support/job.hpp"
#include "collectives/algorithm_table.hpp"

namespace mci::test {
namespace {

// The worker's "algorithms:" line: which algorithms each collective ran with.
std::string algorithms_of(const std::string& kind, const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("algorithms:.* " + kind + "=([a-z_+]+)"))) return "(not run)";
  return m[1];
}

struct Case {
  int world;
  std::string algo;
  std::string transport = "";
  // Pretend hosts (MCI_HOST_ID of each rank, comma-separated): several
  // hosts make all-reduce hierarchical.
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
  Job job(c.world, {"mci_test_worker", full ? "matrix" : "matrix-quick"}, env);
  job.wait(std::chrono::seconds(240));
  for (int r = 0; r < c.world; ++r) {
    const auto st = job.status(r);
    EXPECT_TRUE(st.exited && st.code == 0) << "rank " << r << " code " << st.code << " sig " << st.sig
                                           << "\n" << job.all_output();
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
      EXPECT_NE(out.find("all_reduce is hierarchical"), std::string::npos) << out;
      EXPECT_EQ(algorithms_of("all_reduce", out), "hierarchical") << out;
      EXPECT_EQ(algorithms_of("broadcast", out), "tree") << out;
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
                         ::testing::Values(Case{1, ""}, Case{2, ""}, Case{3, ""}, Case{4, ""},
                                           Case{5, "", "shm"}, Case{2, "", "tcp"}, Case{3, "", "tcp"},
                                           Case{4, "", "tcp"}, Case{2, "ring"}, Case{3, "ring"},
                                           Case{4, "ring"}, Case{3, "recursive_doubling"},
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
    Job job(world, {"mci_test_worker", "async"});
    job.wait();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("async ok"), std::string::npos) << job.output(r);
    }
  }
}

TEST(PointToPoint, ReceivesMatchSendsByTagNotArrivalOrder) {
  Job job(3, {"mci_test_worker", "p2p-tags"});
  job.wait();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.status(r).code, 0) << job.all_output();
}

TEST(PointToPoint, AsyncSendAndRecvOfLargeBuffersProgressTogether) {
  for (int world : {2, 3}) {
    Job job(world, {"mci_test_worker", "p2p-exchange"}, {{"MCI_TEST_TIMEOUT_MS", "60000"}});
    job.wait(std::chrono::seconds(90));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("exchange ok"), std::string::npos) << job.output(r);
    }
  }
}

}  // namespace
}  // namespace mci::test
