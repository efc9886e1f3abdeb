// elastic_train in place: real processes killed by SIGKILL at chosen points
// of a step; the survivors shrink their group, take the most advanced
// replica, redo the interrupted step and finish with the parameters of the
// same training never interrupted (the global batch does not depend on the
// world size). The test hosts the store, as mcirun does; the launcher's
// --on-rank-loss=continue runs are in test_launcher_rank_loss.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../support/job.hpp"
#include "../support/ports.hpp"
#include "launcher_run.hpp"

namespace mci::test {
namespace {

struct TrainRun {
  std::vector<std::string> shm_left;  // segments the job's processes made (mci-PID-...) still in /dev/shm
  std::map<int, double> final_sum;    // start rank -> the sum it printed
  std::map<int, int> final_world;
  std::vector<int> steps;  // every "step S" line, in the order of the ranks' outputs
  std::vector<std::string> recoveries;
  std::string all;
};

TrainRun train(int world, int steps, const std::vector<std::string>& deaths, const std::string& transport) {
  std::vector<std::string> argv{"elastic_train", "--steps", std::to_string(steps), "--step-ms", "10"};
  for (const auto& d : deaths) {
    argv.push_back("--die");
    argv.push_back(d);
  }
  Job job(world, argv, {{"MCI_TRANSPORT", transport}});
  job.wait(std::chrono::seconds(60));
  TrainRun run;
  run.all = job.all_output();
  // Only this job's: other tests running beside it make segments of their own.
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) pids.push_back(job.pid(r));
  run.shm_left = mci_shm_segments_of(pids);
  for (int r = 0; r < world; ++r) {
    const auto st = job.status(r);
    EXPECT_FALSE(st.timed_out) << run.all;
    const bool dies = std::any_of(deaths.begin(), deaths.end(),
                                  [&](const std::string& d) { return d.rfind(std::to_string(r) + "@", 0) == 0; });
    if (dies) {
      EXPECT_EQ(st.sig, SIGKILL) << "rank " << r << "\n" << run.all;
    } else {
      EXPECT_EQ(st.code, 0) << "rank " << r << "\n" << run.all;
    }
    // A killed rank 0 printed the steps before its death.
    std::istringstream in(job.output(r));
    for (std::string line; std::getline(in, line);) {
      int s = 0, w = 0, fr = 0;
      char sum[64] = {};
      if (std::sscanf(line.c_str(), "step %d world %d", &s, &w) == 2) run.steps.push_back(s);
      if (std::sscanf(line.c_str(), "final rank %d world %d sum %63s", &fr, &w, sum) == 3) {
        run.final_sum[r] = std::strtod(sum, nullptr);
        run.final_world[r] = w;
      }
      if (line.rfind("recovered ", 0) == 0) run.recoveries.push_back(line);
    }
  }
  return run;
}

// Each step completed once, in order: none skipped, none done twice.
void expect_every_step_once(const TrainRun& run, int steps) {
  std::vector<int> want(static_cast<std::size_t>(steps));
  for (int i = 0; i < steps; ++i) want[static_cast<std::size_t>(i)] = i + 1;
  std::vector<int> got = run.steps;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want) << run.all;
}

double uninterrupted(int steps) {
  static std::map<int, double> cache;
  if (!cache.count(steps)) {
    const TrainRun r = train(4, steps, {}, "shm");
    EXPECT_EQ(r.final_sum.size(), 4u) << r.all;
    cache[steps] = r.final_sum.empty() ? 0.0 : r.final_sum.begin()->second;
  }
  return cache[steps];
}

void expect_survivors_agree(const TrainRun& run, std::size_t survivors, int steps) {
  ASSERT_EQ(run.final_sum.size(), survivors) << run.all;
  const double want = uninterrupted(steps);
  for (const auto& [rank, sum] : run.final_sum) {
    EXPECT_EQ(sum, run.final_sum.begin()->second) << "rank " << rank << "\n" << run.all;
    EXPECT_NEAR(sum, want, 1e-9 * std::abs(want)) << "rank " << rank << "\n" << run.all;
    EXPECT_EQ(run.final_world.at(rank), static_cast<int>(survivors)) << run.all;
  }
}

class ElasticTrainKill : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

INSTANTIATE_TEST_SUITE_P(Points, ElasticTrainKill,
                         ::testing::Combine(::testing::Values("between", "backward", "collective"),
                                            ::testing::Values("shm", "tcp")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

TEST_P(ElasticTrainKill, SurvivorsRedoTheStepAndEndWithTheUninterruptedModel) {
  const auto& [point, transport] = GetParam();
  const TrainRun run = train(4, 12, {"2@6:" + point}, transport);
  expect_survivors_agree(run, 3, 12);
  expect_every_step_once(run, 12);
  ASSERT_EQ(run.recoveries.size(), 1u) << run.all;
  // Killed at step 6: step 6 is redone, nothing before it.
  EXPECT_NE(run.recoveries[0].find("recovered world 3 lost 2 in "), std::string::npos) << run.all;
  EXPECT_NE(run.recoveries[0].find("redo step 6 "), std::string::npos) << run.all;
  EXPECT_EQ(run.shm_left, std::vector<std::string>{}) << "left in /dev/shm by the job's processes";
}

// Two of 4 ranks killed in step 4 of 10: one recovery leaves both out.
void expect_two_lost_in_one_recovery(const std::vector<std::string>& deaths, const std::string& transport,
                                     const std::string& lost) {
  const TrainRun run = train(4, 10, deaths, transport);
  expect_survivors_agree(run, 2, 10);
  expect_every_step_once(run, 10);
  ASSERT_EQ(run.recoveries.size(), 1u) << run.all;
  EXPECT_NE(run.recoveries[0].find("lost " + lost + " "), std::string::npos) << run.all;
}

TEST(ElasticTrain, TwoRanksKilledInTheSameStep) {
  expect_two_lost_in_one_recovery({"1@4:backward", "2@4:collective"}, "shm", "1,2");
}

TEST(ElasticTrain, ARankKilledDuringTheRecoveryIsLeftOutToo) {
  expect_two_lost_in_one_recovery({"1@4:backward", "3@4:recovery"}, "tcp", "1,3");
}

TEST(ElasticTrain, RankZeroKilledAndLaterAnotherOne) {
  // The store is the launcher's (here the test's): losing rank 0 is a loss
  // like any other; its successor prints the step lines.
  const TrainRun run = train(4, 12, {"0@3:collective", "3@8:backward"}, "shm");
  expect_survivors_agree(run, 2, 12);
  expect_every_step_once(run, 12);
  ASSERT_EQ(run.recoveries.size(), 2u) << run.all;
  EXPECT_NE(run.recoveries[0].find("lost 0 "), std::string::npos) << run.all;
  EXPECT_NE(run.recoveries[1].find("world 2 lost 2 "), std::string::npos) << run.all;  // rank 2 of the 3
}

// The finals of an mcirun's output: "final rank R world W sum X" lines.
// Every survivor's final line: the shrunk world, the uninterrupted sum.
void expect_finals(const std::vector<std::pair<int, double>>& f, int survivors, int steps, const std::string& out) {
  ASSERT_EQ(f.size(), static_cast<std::size_t>(survivors)) << out;
  for (const auto& [world, sum] : f) {
    EXPECT_EQ(world, survivors) << out;
    EXPECT_NEAR(sum, uninterrupted(steps), 1e-9 * std::abs(uninterrupted(steps))) << out;
  }
}

TEST(ElasticTrain, UnderMcirunOnRankLossContinue) {
  const std::vector<std::string> args{"--standalone",
                                      "--nproc_per_node=4",
                                      "--on-rank-loss=continue",
                                      built("elastic_train"),
                                      "--steps",
                                      "12",
                                      "--step-ms",
                                      "10",
                                      "--die",
                                      "1@6:collective"};
  Mcirun m(args);
  ASSERT_EQ(m.code(std::chrono::seconds(60)), 0) << m.all();
  EXPECT_NE(m.err().find("mcirun: rank 1 (pid "), std::string::npos) << m.all();
  EXPECT_NE(m.err().find("(signal SIGKILL); --on-rank-loss=continue"), std::string::npos) << m.all();
  expect_finals(finals(m.out()), 3, 12, m.all());
}

TEST(ElasticTrain, ReplaceUnderMcirunBringsTheWorldBackToItsSize) {
  // --on-rank-loss=replace: the survivors shrink and go on, the
  // replacement waits in the running group's store, they grow it at the next
  // step boundary, and the four end with the uninterrupted model.
  const std::vector<std::string> args{"--standalone",
                                      "--nproc_per_node=4",
                                      "--on-rank-loss=replace",
                                      built("elastic_train"),
                                      "--steps",
                                      "14",
                                      "--step-ms",
                                      "10",
                                      "--die",
                                      "2@6:collective"};
  Mcirun m(args);
  ASSERT_EQ(m.code(std::chrono::seconds(60)), 0) << m.all();
  EXPECT_NE(m.out().find("recovered world 3 lost 2 "), std::string::npos) << m.all();
  EXPECT_NE(m.out().find("joined as rank 3 of world 4 at step "), std::string::npos) << m.all();
  EXPECT_NE(m.out().find("grew world 4 joined 1 in "), std::string::npos) << m.all();
  EXPECT_NE(m.err().find("replaced by pid "), std::string::npos) << m.all();
  expect_finals(finals(m.out()), 4, 14, m.all());
}

// mcirun's arguments for node n of two launchers of two ranks on this host,
// elastic_train with `args`.
std::vector<std::string> two_nodes(int n, int port, const std::string& policy, const std::vector<std::string>& args) {
  std::vector<std::string> a{"--nnodes=2",
                             fmt::format("--node_rank={}", n),
                             "--nproc_per_node=2",
                             "--master_addr=127.0.0.1",
                             fmt::format("--master_port={}", port),
                             "--on-rank-loss=" + policy,
                             built("elastic_train")};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

TEST(ElasticTrain, AcrossTwoMcirunNodes) {
  // Two launchers as two nodes of two ranks: rank 3 (node 1) is lost inside
  // a collective; the three survivors, on both nodes, go on.
  const int port = free_port();
  auto node = [&](int n) {
    return two_nodes(n, port, "continue", {"--steps", "12", "--step-ms", "10", "--die", "3@6:collective"});
  };
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "elastic-train-token"}};
  Mcirun n0(node(0), env);
  Mcirun n1(node(1), env);
  ASSERT_EQ(n1.code(std::chrono::seconds(60)), 0) << n0.all() << n1.all();
  ASSERT_EQ(n0.code(std::chrono::seconds(60)), 0) << n0.all() << n1.all();
  auto f = finals(n0.out());
  const auto f1 = finals(n1.out());
  f.insert(f.end(), f1.begin(), f1.end());
  expect_finals(f, 3, 12, n0.all() + n1.all());
}

// --on-rank-loss=replace across two launchers: node 1 lost whole (its
// mcirun SIGKILLed; its guardian ends its ranks) leaves ranks 2 and 3 with
// no launcher of theirs. Node 0 sees node 1's mcirun gone (its store
// connection closed), claims it, and starts both ranks again on itself;
// node 0's ranks shrink, then grow the group back to four at a step
// boundary, and all four end with the uninterrupted model.
// Two launchers of two ranks under replace, elastic_train with `args`:
// node 1's mcirun SIGKILLed once node 0 printed step 3 (its guardian ends
// its ranks); node 0 must then finish with exit code 0. n0: node 0.
void lose_node1_at_step3(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                         std::unique_ptr<Mcirun>& n0) {
  const int port = free_port();
  n0 = std::make_unique<Mcirun>(two_nodes(0, port, "replace", args), env);
  Mcirun n1(two_nodes(1, port, "replace", args), env);
  ASSERT_TRUE(eventually([&] { return n0->out().find("step 3 ") != std::string::npos; }, std::chrono::seconds(60)))
      << n0->all() << n1.all();
  ::kill(n1.pid(), SIGKILL);
  EXPECT_EQ(n1.code(std::chrono::seconds(10)), 1000 + SIGKILL) << n1.all();
  ASSERT_EQ(n0->code(std::chrono::seconds(90)), 0) << n0->all() << n1.all();
}

TEST(ElasticTrain, ReplaceStartsALostNodesRanksOnASurvivingNode) {
  constexpr int kSteps = 30;
  std::unique_ptr<Mcirun> node0;
  ASSERT_NO_FATAL_FAILURE(lose_node1_at_step3({"--steps", std::to_string(kSteps), "--step-ms", "50"},
                                              {{"MCI_JOB_TOKEN", "elastic-train-token"}}, node0));
  Mcirun& n0 = *node0;
  EXPECT_NE(n0.err().find("node 1's mcirun is gone"), std::string::npos) << n0.all();
  EXPECT_NE(n0.err().find("this node (node 0 on "), std::string::npos) << n0.all();
  EXPECT_NE(n0.err().find("rank 2 as pid "), std::string::npos) << n0.all();
  EXPECT_NE(n0.err().find("rank 3 as pid "), std::string::npos) << n0.all();
  // Both at one step boundary, or one at each of two (a slow start, as
  // under a sanitizer): the group is whole again either way.
  EXPECT_NE(n0.out().find("grew world 4 joined "), std::string::npos) << n0.all();
  // Node 0's two ranks and the two it started for node 1, all on world 4.
  expect_finals(finals(n0.out()), 4, kSteps, n0.all());
}

// Every "final ... bits H" line's H.
std::vector<std::string> final_bits(const std::string& out) {
  std::vector<std::string> bits;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(" bits ");
    if (line.rfind("final rank ", 0) == 0 && at != std::string::npos) bits.push_back(line.substr(at + 6));
  }
  return bits;
}

// Same bits after a replacement (docs/env.md, "Same bits"): with
// MCI_REPRODUCIBLE=1 and --whole (no step runs on fewer ranks), node 1 lost
// whole at step 3 and its two ranks started again on node 0 end the run
// with the parameters and optimizer state, bit for bit, of the same
// training on four ranks that nothing interrupted.
TEST(ElasticTrain, ReproducibleReplaceOnAnotherNodeEndsWithTheUninterruptedBits) {
  constexpr int kSteps = 30;
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "elastic-train-token"}, {"MCI_REPRODUCIBLE", "1"}};
  Mcirun reference({"--standalone", "--nproc_per_node=4", built("elastic_train"), "--steps", std::to_string(kSteps)},
                   env);
  ASSERT_EQ(reference.code(std::chrono::seconds(60)), 0) << reference.all();
  const std::vector<std::string> want = final_bits(reference.out());
  ASSERT_EQ(want.size(), 4u) << reference.all();
  for (const auto& b : want) ASSERT_EQ(b, want.front()) << reference.all();

  std::unique_ptr<Mcirun> node0;
  ASSERT_NO_FATAL_FAILURE(
      lose_node1_at_step3({"--steps", std::to_string(kSteps), "--step-ms", "50", "--whole"}, env, node0));
  Mcirun& n0 = *node0;
  EXPECT_NE(n0.out().find("grew world 4 joined "), std::string::npos) << n0.all();
  EXPECT_EQ(n0.out().find("no replacement within"), std::string::npos) << n0.all();
  // No step ran on fewer than 4 ranks.
  EXPECT_EQ(n0.out().find(" world 2 loss "), std::string::npos) << n0.all();
  EXPECT_EQ(n0.out().find(" world 3 loss "), std::string::npos) << n0.all();
  const std::vector<std::string> got = final_bits(n0.out());
  ASSERT_EQ(got.size(), 4u) << n0.all();
  for (const auto& b : got) EXPECT_EQ(b, want.front()) << "not the uninterrupted run's bits\n" << n0.all();
}

}  // namespace
}  // namespace mci::test
