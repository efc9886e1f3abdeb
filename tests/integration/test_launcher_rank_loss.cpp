// mcirun --on-rank-loss: stop (the default) ends the job at the first loss,
// as always; continue lets the other ranks go on, says so as it happens,
// lists the lost ranks in the summary and exits 0 when a rank survived and
// every survivor exited 0. Across nodes, a loss on node 1 stops nothing on
// node 0, and the nodes must agree on the policy.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/ports.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Rank $LOSE leaves a helper in its process group (its pid in D/child),
// writes its own pid to D/lost and SIGKILLs itself. The others wait, with
// no timing to hope for, until that pid is gone (mcirun reaped it), then
// print their end line. D: $SHARED (both nodes' ranks) or $TEST_DIR.
const char* const kLoseOne =
    "D=${SHARED:-$TEST_DIR}; echo MCI_ON_RANK_LOSS=$MCI_ON_RANK_LOSS rank=$RANK;"
    "if [ $RANK = $LOSE ]; then sleep 30 & echo $! > $D/child; echo $$ > $D/lost.tmp; mv $D/lost.tmp $D/lost;"
    " kill -9 $$; fi;"
    "while [ ! -s $D/lost ]; do sleep 0.01; done;"
    "while kill -0 $(cat $D/lost) 2>/dev/null; do sleep 0.01; done;"
    "echo rank $RANK: end";

Strings with_program(Strings flags, const std::string& script) {
  flags.insert(flags.end(), {"/bin/sh", "-c", script});
  return flags;
}

// The helper the lost rank left: mcirun must have ended it; whatever
// happened, it does not outlive the test.
class Helper {
 public:
  explicit Helper(std::string file) : file_(std::move(file)) {}
  ~Helper() {
    if (const pid_t p = pid(); p > 0 && process_alive(p)) ::kill(p, SIGKILL);
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  pid_t pid() const {
    const std::string text = slurp(file_);
    return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
  }

 private:
  std::string file_;
};

TEST(RankLoss, ContinueLetsTheOtherRanksGoOn) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=3", "--on-rank-loss=continue", "--grace=0.5"}, kLoseOne),
           {{"LOSE", "1"}});
  Helper helper(m.dir() + "/child");
  ASSERT_EQ(m.code(60s), 0) << m.all();
  const std::string out = m.out(), err = m.err();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("MCI_ON_RANK_LOSS=continue rank={}\n", r))) << m.all();
  }
  EXPECT_TRUE(contains(out, "rank 0: end\n")) << m.all();
  EXPECT_TRUE(contains(out, "rank 2: end\n")) << m.all();
  EXPECT_FALSE(contains(out, "rank 1: end")) << m.all();
  const std::string pid = slurp(m.dir() + "/lost").substr(0, slurp(m.dir() + "/lost").find('\n'));
  EXPECT_TRUE(contains(err, fmt::format("mcirun: rank 1 (pid {} on ", pid))) << err;
  EXPECT_TRUE(contains(err, "(signal SIGKILL); --on-rank-loss=continue: the 2 other rank(s) go on\n")) << err;
  EXPECT_TRUE(contains(err, "1 rank(s) lost on node 0 (host ")) << err;
  EXPECT_TRUE(contains(err, fmt::format("mcirun:   rank 1 (pid {} on ", pid))) << err;
  EXPECT_TRUE(contains(err, "the job went on without 1 lost rank(s): its 2 survivor(s) (rank(s) 0, 2) exited 0"))
      << err;
  EXPECT_FALSE(contains(err, "sent SIGTERM to rank")) << "no survivor was stopped: " << err;
  // What the lost rank left in its process group was ended with it.
  EXPECT_TRUE(contains(err, "left running in its process group")) << err;
  ASSERT_GT(helper.pid(), 0) << m.all();
  EXPECT_TRUE(!process_alive(helper.pid())) << "the lost rank's helper outlived mcirun: " << m.all();
}

TEST(RankLoss, StopIsTheDefault) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=3"},
                        "echo MCI_ON_RANK_LOSS=$MCI_ON_RANK_LOSS rank=$RANK; if [ $RANK = 1 ]; then exit 3; fi;"
                        " exec sleep 30"));
  ASSERT_EQ(m.code(60s), 1) << m.all();
  EXPECT_LT(m.seconds(), 20) << "the loss stopped the others: " << m.all();
  EXPECT_TRUE(contains(m.out(), "MCI_ON_RANK_LOSS=stop rank=1")) << m.all();
  EXPECT_TRUE(contains(m.err(), "job failed: rank 1")) << m.all();
  EXPECT_TRUE(contains(m.err(), "sent SIGTERM to rank 0")) << m.all();
  EXPECT_FALSE(contains(m.err(), "lost")) << m.all();
}

TEST(RankLoss, RefusesWhatItCannotDo) {
  struct Case {
    Strings flags;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"--on-rank-loss=replace"},
       "mcirun: --on-rank-loss=replace is not built yet: use continue (the survivors go on, see "
       "docs/fault-tolerance.md) or --max-restarts\n"},
      {{"--on_rank_loss=later"}, "mcirun: --on-rank-loss='later' is not valid: use stop"},
      {{"--on-rank-loss=continue", "--max-restarts=2"},
       "mcirun: --on-rank-loss=continue and --max-restarts=2 are two answers to a lost rank"},
  };
  for (const Case& c : cases) {
    Strings flags{"--standalone"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    Mcirun m(with_program(flags, "touch $TEST_DIR/ran"));
    EXPECT_EQ(m.code(), 2) << m.all();
    EXPECT_TRUE(contains(m.err(), c.message)) << m.all();
    EXPECT_FALSE(m.has_file("ran")) << "nothing started: " << m.all();
  }
}

TEST(RankLoss, EveryRankLostFailsTheJob) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=2", "--on-rank-loss=continue"}, "exit 5"));
  ASSERT_EQ(m.code(60s), 1) << m.all();
  EXPECT_TRUE(contains(m.err(), "2 rank(s) lost on node 0")) << m.all();
  EXPECT_TRUE(contains(m.err(), "job failed: every rank was lost")) << m.all();
}

class SharedDir {
 public:
  SharedDir() {
    char tmpl[] = "/tmp/mcirun-rank-loss-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~SharedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Strings node(int n, int port, const std::string& policy, const std::string& script) {
  Strings flags{"--nnodes=2", fmt::format("--node_rank={}", n), "--nproc_per_node=2", "--master_addr=127.0.0.1",
                fmt::format("--master_port={}", port)};
  if (!policy.empty()) flags.push_back("--on-rank-loss=" + policy);
  return with_program(flags, script);
}

// Two launchers on this host, one per node: rank 3 (node 1) is lost, and
// neither node stops anything for it.
TEST(RankLoss, ContinueAcrossNodes) {
  SharedDir shared;
  const int port = free_port();
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "rank-loss-token"},
                                               {"OMP_NUM_THREADS", "1"},
                                               {"SHARED", shared.path()},
                                               {"LOSE", "3"}};
  Mcirun n0(node(0, port, "continue", kLoseOne), env);
  Mcirun n1(node(1, port, "continue", kLoseOne), env);
  Helper helper(shared.path() + "/child");
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  for (int r : {0, 1}) EXPECT_TRUE(contains(n0.out(), fmt::format("rank {}: end\n", r))) << n0.all();
  EXPECT_TRUE(contains(n1.out(), "rank 2: end\n")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "mcirun: rank 3 (pid ")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "--on-rank-loss=continue: the 1 other rank(s) of this node go on")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "node 1 (host ")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "went on without 1 lost rank(s): its 1 survivor(s) (rank(s) 2) exited 0")) << n1.all();
  EXPECT_FALSE(contains(n0.err(), "lost")) << "node 0 lost nothing: " << n0.all();
  EXPECT_FALSE(contains(n0.err(), "another node failed")) << n0.all();
  ASSERT_GT(helper.pid(), 0) << n1.all();
  EXPECT_TRUE(!process_alive(helper.pid())) << n1.all();
}

// A node given another policy than node 0's starts nothing and says why;
// node 0 stops its ranks rather than wait for that node's.
TEST(RankLoss, TheNodesMustAgree) {
  const int port = free_port();
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "rank-loss-token"}, {"OMP_NUM_THREADS", "1"}};
  Mcirun n0(node(0, port, "", "exec sleep 30"), env);
  Mcirun n1(node(1, port, "continue", "touch $TEST_DIR/ran; exec sleep 30"), env);
  ASSERT_EQ(n1.code(60s), 1) << n0.all() << n1.all();
  ASSERT_EQ(n0.code(60s), 1) << n0.all() << n1.all();
  const std::string why = "--on-rank-loss=continue on node 1 (host " + host_name() +
                          "), but node 0 runs with --on-rank-loss=stop: " + "give every node the same --on-rank-loss";
  EXPECT_TRUE(contains(n1.err(), "mcirun: " + why + "; this node starts nothing")) << n1.all();
  EXPECT_FALSE(n1.has_file("ran")) << n1.all();
  EXPECT_TRUE(contains(n0.err(), "another node failed, node 1: " + why)) << n0.all();
}

}  // namespace
}  // namespace mci::test
