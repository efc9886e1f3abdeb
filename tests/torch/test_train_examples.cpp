// The seed's Examples 1 and 2 in C++ (examples/train), run as a user runs
// them: through mcirun, on one node and as two nodes, asserting the seed's
// lines.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include <fmt/format.h>

#include "integration/launcher_run.hpp"
#include "mci/init.hpp"
#include "support/ports.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

// Every stdout line is "Rang r, Époque e, Perte : <float>"; each rank prints
// epochs 0 to 4 once each, in order.
void expect_train_ddp_lines(const std::string& out, int world) {
  const std::regex line(R"(Rang (\d+), Époque (\d), Perte : (\d+\.\d+(e-?\d+)?))");
  std::vector<int> next_epoch(static_cast<std::size_t>(world), 0);
  for (const auto& l : lines_of(out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << "unexpected stdout line: '" << l << "'";
    const int rank = std::stoi(m[1]);
    ASSERT_LT(rank, world) << l;
    EXPECT_EQ(std::stoi(m[2]), next_epoch[static_cast<std::size_t>(rank)]++) << l;
    EXPECT_GT(std::stod(m[3]), 0.0) << l;
  }
  for (int e : next_epoch) EXPECT_EQ(e, 5) << out;
}

class TrainDdp : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, TrainDdp, ::testing::Values("default", "cpu", "gloo"));

TEST_P(TrainDdp, EveryRankPrintsTheSeedsLinePerEpoch) {
  const std::string b = GetParam();
  if (b == "gloo" && !backend_available("gloo")) GTEST_SKIP() << "this build has no Gloo";
  Mcirun m({"--standalone", "--nproc_per_node=2", built("train_ddp")},
           {{"MCI_BACKEND", b == "default" ? std::string("\x01") : b}, {"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(120s), 0) << m.all();
  expect_train_ddp_lines(m.out(), 2);
}

TEST(TrainDdp, NcclWithoutCudaLibTorchSaysWhatToDo) {
  Mcirun m({"--standalone", "--nproc_per_node=2", built("train_ddp")},
           {{"MCI_BACKEND", "nccl"}, {"CUDA_VISIBLE_DEVICES", ""}, {"OMP_NUM_THREADS", "1"}});
  EXPECT_NE(m.code(120s), 0);
  EXPECT_NE(m.all().find("MCI_BACKEND=nccl needs a LibTorch built with CUDA and a visible GPU"), std::string::npos)
      << m.all();
  EXPECT_NE(m.all().find("Run with MCI_BACKEND=cpu or gloo"), std::string::npos) << m.all();
  EXPECT_EQ(m.out().find("Rang "), std::string::npos) << m.all();
}

TEST(TrainMultinode, TwoNodesOfTwoRanksEachFinish) {
  const int port = free_port();
  auto node = [&](int node_rank) {
    return Strings{"--nnodes=2",
                   fmt::format("--node_rank={}", node_rank),
                   "--nproc_per_node=2",
                   "--master_addr=127.0.0.1",
                   fmt::format("--master_port={}", port),
                   built("train_multinode")};
  };
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "train-multinode"}, {"OMP_NUM_THREADS", "1"}};
  Mcirun n0(node(0), env);
  Mcirun n1(node(1), env);
  ASSERT_EQ(n0.code(120s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n1.code(120s), 0) << n0.all() << n1.all();
  std::set<std::string> lines;
  for (auto* m : {&n0, &n1}) {
    for (const auto& l : lines_of(m->out())) lines.insert(l);
  }
  EXPECT_EQ(lines, (std::set<std::string>{"Rang 0 terminé", "Rang 1 terminé", "Rang 2 terminé", "Rang 3 terminé"}));
}

}  // namespace
}  // namespace mci::test
