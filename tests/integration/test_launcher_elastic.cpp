// mcirun --nnodes MIN:MAX, torchrun's elastic membership: each attempt runs
// on the nodes that are there (at least MIN); a node that is lost is left
// out of the next attempt, a node started later joins the next one, and
// ranks, WORLD_SIZE and GROUP_RANK are numbered again. Two launchers on this
// host play two nodes; node 0 (--node_rank=0) hosts the store.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/ports.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

const std::map<std::string, std::string> kElasticEnv{{"MCI_JOB_TOKEN", "elastic-token"}, {"OMP_NUM_THREADS", "1"}};

// One node's command line. Nodes beat every second and are lost after two
// silent ones, so a lost node is seen in about 2 s (torchrun: 5 s x 3).
Strings node(int port, int n, const std::string& nnodes, const std::string& conf, const std::string& script) {
  return {"--nnodes=" + nnodes,
          fmt::format("--node_rank={}", n),
          "--nproc_per_node=2",
          "--master_addr=127.0.0.1",
          fmt::format("--master_port={}", port),
          "--max-restarts=1",
          "--rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=2," + conf,
          "/bin/sh",
          "-c",
          "echo attempt=$TORCHELASTIC_RESTART_COUNT rank=$RANK world=$WORLD_SIZE "
          "group=$GROUP_RANK/$GROUP_WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE;"
          // Written whole, then renamed: a file the test sees holds the pid.
          "echo $$ > $TEST_DIR/.pid.$$ && mv $TEST_DIR/.pid.$$ $TEST_DIR/pid.$TORCHELASTIC_RESTART_COUNT.$RANK;" +
              script};
}

// The processes of a node whose mcirun the test SIGKILLs: they must die
// with it (no orphan); whatever happens, none outlives the test.
class RankPids {
 public:
  void add(pid_t p) { pids_.push_back(p); }
  bool all_gone() const {
    for (pid_t p : pids_) {
      if (process_alive(p)) return false;
    }
    return true;
  }
  ~RankPids() {
    for (pid_t p : pids_) {
      if (process_alive(p)) ::kill(p, SIGKILL);
    }
  }

 private:
  std::vector<pid_t> pids_;
};

// Attempt 0 runs until it is stopped; later attempts finish at once.
const std::string kSleepOnFirstAttempt = "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 60; fi";

TEST(Elastic, ALostNodeIsLeftOutAndTheNextAttemptRunsOnTheNodesLeft) {
  const int port = free_port();
  const std::string conf = "join_timeout=30,last_call_timeout=30";
  Mcirun n0(node(port, 0, "1:2", conf, kSleepOnFirstAttempt), kElasticEnv);
  Mcirun n1(node(port, 1, "1:2", conf, kSleepOnFirstAttempt), kElasticEnv);
  ASSERT_TRUE(
      eventually([&] { return n1.has_file("pid.0.2") && n1.has_file("pid.0.3") && n0.has_file("pid.0.1"); }, 30s))
      << n0.all() << n1.all();
  RankPids node1;
  for (const char* f : {"pid.0.2", "pid.0.3"}) node1.add(std::stoi(n1.file(f)));
  ::kill(n1.pid(), SIGKILL);
  EXPECT_EQ(n1.code(), 1000 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return node1.all_gone(); })) << "node 1's processes outlived its mcirun";

  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  // (Node 1's lines may die with its mcirun before they are relayed.)
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(n0.out(), fmt::format("attempt=0 rank={} world=4 group=0/2 local={}/2", r, r))) << n0.all();
  }
  // The second attempt: node 0 alone, WORLD_SIZE 2.
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(n0.out(), fmt::format("attempt=1 rank={} world=2 group=0/1 local={}/2", r, r))) << n0.all();
  }
  const std::string err = n0.err();
  // Its store connection closed with it: lost at once, not after two
  // silent beats.
  EXPECT_TRUE(contains(err, "node 1: lost: its mcirun is gone (its store connection closed")) << err;
  EXPECT_TRUE(contains(err, "restarting every process, restart 1 of 1")) << err;
  EXPECT_TRUE(contains(err, "attempt 1: 1 node(s) (--nnodes=1:2)")) << err;
  EXPECT_TRUE(contains(err, "ranks 0 to 1 of WORLD_SIZE 2")) << err;
}

TEST(Elastic, ANodeStartedLaterJoinsAtTheNextAttempt) {
  const int port = free_port();
  // Node 0 starts alone at once (last_call_timeout=0); its rank 0 fails
  // when the test says, once node 1 waits to join.
  const std::string conf = "join_timeout=30,last_call_timeout=0";
  const std::string script =
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then"
      "  if [ $RANK = 0 ]; then while [ ! -e $TEST_DIR/fail ]; do sleep 0.02; done; exit 3; fi;"
      "  exec sleep 60;"
      "fi";
  Mcirun n0(node(port, 0, "1:2", conf, script), kElasticEnv);
  ASSERT_TRUE(eventually([&] { return n0.has_file("pid.0.0") && n0.has_file("pid.0.1"); }, 30s)) << n0.all();
  Mcirun n1(node(port, 1, "1:2", conf, script), kElasticEnv);
  ASSERT_TRUE(eventually([&] { return contains(n1.err(), "waiting to join it at attempt 1"); }, 30s))
      << n0.all() << n1.all();
  { std::ofstream(n0.dir() + "/fail") << "now\n"; }

  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(n0.out(), fmt::format("attempt=0 rank={} world=2 group=0/1", r))) << n0.all();
  }
  const std::string out = n0.out() + n1.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("attempt=1 rank={} world=4 group={}/2 local={}/2", r, r / 2, r % 2)))
        << n0.all() << n1.all();
  }
  EXPECT_FALSE(contains(n1.out(), "attempt=0")) << "node 1 came after attempt 0 started: " << n1.all();
  EXPECT_TRUE(contains(n1.err(), "attempt 1: 2 node(s) (--nnodes=1:2)")) << n1.all();
}

// torchrun's way: the same command line on every node, no --node_rank; the
// mcirun that binds the store's address hosts it, the other joins it.
TEST(Elastic, WithoutNodeRankTheNodeThatBindsTheStoreIsNodeZero) {
  const int port = free_port();
  auto same = [&] {
    Strings a = node(port, 0, "1:2", "join_timeout=30,last_call_timeout=30", "exit 0");
    a.erase(a.begin() + 1);  // --node_rank
    return a;
  };
  Mcirun a(same(), kElasticEnv);
  Mcirun b(same(), kElasticEnv);
  ASSERT_EQ(a.code(60s), 0) << a.all() << b.all();
  ASSERT_EQ(b.code(60s), 0) << a.all() << b.all();
  const std::string out = a.out() + b.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("attempt=0 rank={} world=4 group={}/2 local={}/2", r, r / 2, r % 2)))
        << a.all() << b.all();
  }
}

TEST(Elastic, FewerThanMinNodesEndTheJobWithAClearError) {
  const int port = free_port();
  Mcirun alone(node(port, 0, "2:3", "join_timeout=1", "exit 0"), kElasticEnv);
  ASSERT_EQ(alone.code(30s), 1) << alone.all();
  EXPECT_TRUE(contains(alone.err(),
                       "cannot start attempt 0: 1 node(s) joined within 1 s (--rdzv_conf join_timeout), "
                       "fewer than the 2 that --nnodes=2:3 needs"))
      << alone.all();
  EXPECT_FALSE(alone.has_file("pid.0.0")) << "nothing starts below MIN: " << alone.all();
}

TEST(Elastic, ALostNodeThatLeavesFewerThanMinEndsTheJob) {
  const int port = free_port();
  const std::string conf = "join_timeout=3,last_call_timeout=0";
  Mcirun n0(node(port, 0, "2:3", conf, kSleepOnFirstAttempt), kElasticEnv);
  Mcirun n1(node(port, 1, "2:3", conf, kSleepOnFirstAttempt), kElasticEnv);
  ASSERT_TRUE(
      eventually([&] { return n1.has_file("pid.0.2") && n1.has_file("pid.0.3") && n0.has_file("pid.0.1"); }, 60s))
      << n0.all() << n1.all();
  RankPids node1;
  for (const char* f : {"pid.0.2", "pid.0.3"}) node1.add(std::stoi(n1.file(f)));
  ::kill(n1.pid(), SIGKILL);
  EXPECT_EQ(n1.code(), 1000 + SIGKILL);
  ASSERT_EQ(n0.code(60s), 1) << n0.all();
  const std::string err = n0.err();
  EXPECT_TRUE(contains(err, "fewer than the 2 that --nnodes=2:3 needs; lost: ")) << err;
  EXPECT_FALSE(contains(n0.out(), "attempt=1")) << n0.all();
  EXPECT_TRUE(node1.all_gone());
}

}  // namespace
}  // namespace mci::test
