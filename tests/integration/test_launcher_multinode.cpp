// Two mcirun processes on this host, one per "node" of a two-node job, as
// they would run on two machines: --nnodes=2, each its --node_rank, the
// same master address and port.
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/ports.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

Strings node(int node_rank, int port, const Strings& program) {
  Strings a{"--nnodes=2", fmt::format("--node_rank={}", node_rank), "--nproc_per_node=2", "--master_addr=127.0.0.1",
            fmt::format("--master_port={}", port)};
  a.insert(a.end(), program.begin(), program.end());
  return a;
}

const std::map<std::string, std::string> kTwoNodeEnv{{"MCI_JOB_TOKEN", "two-node-token"}, {"OMP_NUM_THREADS", "1"}};

// Every node's ranks get the same MASTER_PORT for the program: a port node
// 0's mcirun picked, not --master_port (mcirun's store holds that one, and
// reaches the ranks as MCI_STORE_PORT).
TEST(MultiNode, RanksAreNumberedAcrossNodes) {
  const int port = free_port();
  const Strings program{"/bin/sh", "-c",
                        "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE GROUP_RANK=$GROUP_RANK "
                        "MCI_STORE_PORT=$MCI_STORE_PORT; echo MASTER_PORT=$MASTER_PORT"};
  Mcirun n1(node(1, port, program), kTwoNodeEnv);  // the order the nodes start in does not matter
  Mcirun n0(node(0, port, program), kTwoNodeEnv);
  ASSERT_EQ(n0.code(), 0) << n0.all();
  ASSERT_EQ(n1.code(), 0) << n1.all();
  std::set<std::string> lines, master_ports;
  for (auto* m : {&n0, &n1}) {
    for (const auto& l : lines_of(m->out())) (l.rfind("MASTER_PORT=", 0) == 0 ? master_ports : lines).insert(l);
  }
  std::set<std::string> expect;
  for (int r = 0; r < 4; ++r) {
    expect.insert(
        fmt::format("RANK={} LOCAL_RANK={} WORLD_SIZE=4 GROUP_RANK={} MCI_STORE_PORT={}", r, r % 2, r / 2, port));
  }
  EXPECT_EQ(lines, expect) << n0.all() << n1.all();
  ASSERT_EQ(master_ports.size(), 1u) << "one MASTER_PORT for the whole job: " << n0.all() << n1.all();
  EXPECT_NE(*master_ports.begin(), fmt::format("MASTER_PORT={}", port)) << "the store's port is not the program's";
  EXPECT_NE(*master_ports.begin(), "MASTER_PORT=") << "MASTER_PORT is set";
  EXPECT_TRUE(contains(n0.out(), "RANK=0 ")) << "node 0 runs ranks 0 and 1";
  EXPECT_TRUE(contains(n1.out(), "RANK=3 ")) << "node 1 runs ranks 2 and 3";
}

// Nodes that run different numbers of processes (2 + 1 + 2), as torchrun's
// agents allow: ranks are numbered node after node by a running sum, and
// every process learns the whole world's size.
TEST(MultiNode, NodesMayRunDifferentNumbersOfProcesses) {
  const int port = free_port();
  const Strings
      program{"/bin/sh", "-c",
              "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
              "GROUP_RANK=$GROUP_RANK"};
  auto at = [&](int node_rank, int nproc) {
    return args({"--nnodes=3", fmt::format("--node_rank={}", node_rank), fmt::format("--nproc_per_node={}", nproc),
                 "--master_addr=127.0.0.1", fmt::format("--master_port={}", port)},
                program);
  };
  Mcirun n2(at(2, 2), kTwoNodeEnv);
  Mcirun n1(at(1, 1), kTwoNodeEnv);
  Mcirun n0(at(0, 2), kTwoNodeEnv);
  ASSERT_EQ(n0.code(), 0) << n0.all();
  ASSERT_EQ(n1.code(), 0) << n1.all();
  ASSERT_EQ(n2.code(), 0) << n2.all();
  std::set<std::string> lines;
  for (auto* m : {&n0, &n1, &n2}) {
    for (const auto& l : lines_of(m->out())) lines.insert(l);
  }
  const std::set<std::string> expect{"RANK=0 LOCAL_RANK=0 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 GROUP_RANK=0",
                                     "RANK=1 LOCAL_RANK=1 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 GROUP_RANK=0",
                                     "RANK=2 LOCAL_RANK=0 WORLD_SIZE=5 LOCAL_WORLD_SIZE=1 GROUP_RANK=1",
                                     "RANK=3 LOCAL_RANK=0 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 GROUP_RANK=2",
                                     "RANK=4 LOCAL_RANK=1 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 GROUP_RANK=2"};
  EXPECT_EQ(lines, expect) << n0.all() << n1.all() << n2.all();
}

// Two launchers that say the same --node_rank are one node too many: both
// are told so, by name, and nothing starts.
TEST(MultiNode, TwoLaunchersWithOneNodeRankAreRefused) {
  const int port = free_port();
  auto at = [&](int node_rank) {
    return args({"--nnodes=3", fmt::format("--node_rank={}", node_rank), "--nproc_per_node=1",
                 "--master_addr=127.0.0.1", fmt::format("--master_port={}", port)},
                {"/bin/sh", "-c", "touch $TEST_DIR/ran.$RANK"});
  };
  Mcirun n0(at(0), kTwoNodeEnv);
  Mcirun a(at(1), kTwoNodeEnv);
  Mcirun b(at(1), kTwoNodeEnv);
  for (auto* m : {&n0, &a, &b}) {
    EXPECT_EQ(m->code(), 1) << m->all();
    EXPECT_TRUE(contains(m->err(), "2 launchers of this job said --node_rank=1 (of --nnodes=3)")) << m->all();
    EXPECT_FALSE(m->has_file("ran.0") || m->has_file("ran.1") || m->has_file("ran.2")) << "a rank started";
  }
}

TEST(MultiNode, AGroupSpansBothLaunchersThroughNode0sStore) {
  const int port = free_port();
  const Strings program{self_program(), "--scenario=init"};
  auto env = kTwoNodeEnv;
  env["MCI_TEST_TIMEOUT_MS"] = "20000";
  Mcirun n0(node(0, port, program), env);
  Mcirun n1(node(1, port, program), env);
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  const std::string out = n0.out() + n1.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("joined rank {} size 4 local_rank {}", r, r % 2))) << out;
  }
}

TEST(MultiNode, Node0KeepsTheStoreUpUntilEveryNodeIsDone) {
  // Node 0's ranks finish at once, node 1's a second later: node 0 must not
  // take the store away while node 1 may still need it.
  const int port = free_port();
  Mcirun n0(node(0, port, {"/bin/true"}), kTwoNodeEnv);
  Mcirun n1(node(1, port, {"/bin/sh", "-c", "sleep 1; touch $TEST_DIR/done.$RANK"}), kTwoNodeEnv);
  ASSERT_EQ(n0.code(), 0) << n0.all();
  EXPECT_TRUE(n1.has_file("done.2") && n1.has_file("done.3")) << "node 0 returned before node 1 was done";
  EXPECT_GE(n0.seconds(), 0.9);
  ASSERT_EQ(n1.code(), 0) << n1.all();
}

TEST(MultiNode, AFailureOnOneNodeStopsTheOther) {
  const int port = free_port();
  // Node 0 only sleeps. On node 1, rank 2 fails once node 0's ranks are up.
  const Strings program{"/bin/sh", "-c",
                        "if [ $RANK = 2 ]; then while [ ! -e $READY ]; do sleep 0.01; done; exit 5; fi;"
                        "if [ $RANK = 0 ]; then touch $READY; fi; exec sleep 30"};
  Mcirun n0(node(0, port, program), [&] {
    auto e = kTwoNodeEnv;
    e["READY"] = "/tmp/mcirun-multinode-ready-" + std::to_string(port);
    return e;
  }());
  Mcirun n1(node(1, port, program), [&] {
    auto e = kTwoNodeEnv;
    e["READY"] = "/tmp/mcirun-multinode-ready-" + std::to_string(port);
    return e;
  }());
  EXPECT_EQ(n1.code(), 1) << n1.all();
  EXPECT_EQ(n0.code(), 1) << n0.all();
  std::remove(("/tmp/mcirun-multinode-ready-" + std::to_string(port)).c_str());
  EXPECT_TRUE(contains(n1.err(), "rank 2 (pid")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "failed: exit code 5")) << n1.all();
  EXPECT_TRUE(contains(n0.err(), "another node failed, node 1: rank 2 (pid")) << n0.all();
  EXPECT_TRUE(contains(n0.err(), "sent SIGTERM to rank 0")) << n0.all();
  EXPECT_TRUE(contains(n0.err(), "job failed on another node: node 1: rank 2")) << n0.all();
  EXPECT_LT(n0.seconds(), 10.0) << "node 0 stopped long before its ranks' 30 s sleep: " << n0.all();
}

// Ctrl-C on either node's mcirun reaches every rank of the job as SIGINT:
// the node that got it tells the others through the store, and they pass
// the same signal on (node 0 keeps the store up until node 1 has read it).
class MultiNodeStop : public ::testing::TestWithParam<int> {
  DefaultSigint sigint_;
};

TEST_P(MultiNodeStop, CtrlCOnOneNodeIsPassedOnByEveryNode) {
  const int stopped = GetParam();
  const int other = 1 - stopped;
  const int port = free_port();
  const Strings program{"/bin/sh", "-c",
                        "trap 'echo got INT > $TEST_DIR/got.$RANK; exit 0' INT;"
                        "trap 'echo got TERM > $TEST_DIR/got.$RANK; exit 0' TERM;"
                        "touch $TEST_DIR/ready.$RANK; while :; do sleep 0.05; done"};
  Mcirun n0(node(0, port, program), kTwoNodeEnv);
  Mcirun n1(node(1, port, program), kTwoNodeEnv);
  Mcirun* nodes[2] = {&n0, &n1};
  ASSERT_TRUE(eventually(
      [&] {
        return n0.has_file("ready.0") && n0.has_file("ready.1") && n1.has_file("ready.2") && n1.has_file("ready.3");
      },
      20s))
      << n0.all() << n1.all();
  ASSERT_EQ(::kill(nodes[stopped]->pid(), SIGINT), 0);
  EXPECT_EQ(nodes[stopped]->code(), 130) << nodes[stopped]->all();
  EXPECT_EQ(nodes[other]->code(), 130) << nodes[other]->all();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(nodes[r / 2]->file(fmt::format("got.{}", r)), "got INT\n")
        << "rank " << r << ": " << n0.all() << n1.all();
  }
  const std::string err = nodes[other]->err();
  EXPECT_TRUE(contains(err, fmt::format("mcirun: node {} (host ", stopped))) << err;
  EXPECT_TRUE(contains(err, "received SIGINT: passing it on to this node's processes")) << err;
  EXPECT_TRUE(contains(err, fmt::format("job stopped by SIGINT sent to mcirun on node {} (host ", stopped))) << err;
  EXPECT_FALSE(contains(err, "went away")) << "the stop arrived before the store closed: " << err;
}

INSTANTIATE_TEST_SUITE_P(MultiNode, MultiNodeStop, ::testing::Values(0, 1),
                         [](const auto& info) { return fmt::format("OnNode{}", info.param); });

TEST(MultiNode, WithoutATokenTheJobRunsUnauthenticatedAndSaysSo) {
  const int port = free_port();
  const Strings program{"/bin/sh", "-c", "echo token=[$MCI_JOB_TOKEN]"};
  Mcirun n0(node(0, port, program), {{"OMP_NUM_THREADS", "1"}});
  Mcirun n1(node(1, port, program), {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(n0.code(), 0) << n0.all();
  ASSERT_EQ(n1.code(), 0) << n1.all();
  EXPECT_EQ(n0.out(), "token=[]\ntoken=[]\n");
  EXPECT_TRUE(contains(n0.err(), "mcirun: MCI_JOB_TOKEN is not set: this multi-node job")) << n0.all();
  EXPECT_EQ(lines_of(n0.err()).size(), 1u) << "said once: " << n0.all();
}

}  // namespace
}  // namespace mci::test
