// mcirun --on-rank-loss: stop (the default) ends the job at the first loss,
// as always; continue lets the other ranks go on, says so as it happens,
// lists the lost ranks in the summary and exits 0 when a rank survived and
// every survivor exited 0; replace does the same and starts a new process in
// the lost one's place (MCI_REPLACEMENT=K), up to --max-restarts per node.
// Across nodes, a loss on node 1 stops nothing on node 0, and the nodes must
// agree on the policy.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/ports.hpp"
#include "support/temp_dir.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

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
      {{"--standalone", "--on_rank_loss=later"},
       "mcirun: --on-rank-loss='later' is not valid: use stop (a lost rank stops every process: the default), "
       "continue (the other ranks go on without it) or replace (the other ranks go on and a new process takes its "
       "place)\n"},
      {{"--standalone", "--on-rank-loss=continue", "--max-restarts=2"},
       "mcirun: --on-rank-loss=continue and --max-restarts=2 are two answers to a lost rank"},
      {{"--on-rank-loss=replace", "--nnodes=1:2", "--node_rank=0", "--master_addr=127.0.0.1"},
       "mcirun: --on-rank-loss=replace with an elastic --nnodes=1:2 is not built yet (a lost node ends the attempt "
       "there): give a fixed --nnodes N, or drop --on-rank-loss\n"},
  };
  for (const Case& c : cases) {
    Mcirun m(with_program(c.flags, "touch $TEST_DIR/ran"));
    EXPECT_EQ(m.code(), 2) << m.all();
    EXPECT_TRUE(contains(m.err(), c.message)) << m.all();
    EXPECT_FALSE(m.has_file("ran")) << "nothing started: " << m.all();
  }
  // replace is built: accepted, with --max-restarts as its cap.
  for (const Strings& flags :
       {Strings{"--on-rank-loss=replace"}, Strings{"--on-rank-loss=replace", "--max-restarts=2"}}) {
    Strings all{"--standalone"};
    all.insert(all.end(), flags.begin(), flags.end());
    Mcirun m(with_program(all, "echo MCI_ON_RANK_LOSS=$MCI_ON_RANK_LOSS replacement=${MCI_REPLACEMENT:-none}"));
    EXPECT_EQ(m.code(60s), 0) << m.all();
    EXPECT_TRUE(contains(m.out(), "MCI_ON_RANK_LOSS=replace replacement=none\n")) << m.all();
    EXPECT_FALSE(contains(m.err(), "lost")) << m.all();
  }
}

// Rank $LOSE's first start leaves a helper in its process group and
// SIGKILLs itself; its replacement (told by MCI_REPLACEMENT) prints what it
// was given and writes D/replaced as it ends. The others print theirs and
// wait for that file, so they are still running when the replacement
// starts. D: $SHARED (both nodes' ranks) or $TEST_DIR.
const char* const kReplaceOne =
    "D=${SHARED:-$TEST_DIR}; echo MCI_ON_RANK_LOSS=$MCI_ON_RANK_LOSS RANK=$RANK LOCAL_RANK=$LOCAL_RANK "
    "WORLD_SIZE=$WORLD_SIZE"
    " MASTER_PORT=$MASTER_PORT CPUS=$(cat /proc/self/status | grep Cpus_allowed_list | cut -f2)"
    " MCI_REPLACEMENT=${MCI_REPLACEMENT:-unset};"
    "if [ -n \"$MCI_REPLACEMENT\" ]; then echo rank $RANK: replacement $MCI_REPLACEMENT end;"
    " echo $$ > $D/replaced.tmp; mv $D/replaced.tmp $D/replaced; exit 0; fi;"
    "if [ $RANK = $LOSE ]; then sleep 30 & echo $! > $D/child; echo $$ > $D/lost.tmp; mv $D/lost.tmp $D/lost;"
    " kill -9 $$; fi;"
    "while [ ! -s $D/replaced ]; do sleep 0.01; done;"
    "echo rank $RANK: end";

// The line of `text` holding `part` (empty when none does).
std::string line_of(const std::string& text, const std::string& part) {
  const auto at = text.find(part);
  if (at == std::string::npos) return {};
  const auto start = text.rfind('\n', at);
  const auto from = start == std::string::npos ? 0 : start + 1;
  return text.substr(from, text.find('\n', at) - from);
}

TEST(RankLoss, ReplaceStartsANewProcessInTheLostOnesPlace) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=3", "--on-rank-loss=replace", "--grace=0.5", "--prefix"},
                        kReplaceOne),
           {{"LOSE", "1"}});
  Helper helper(m.dir() + "/child");
  ASSERT_EQ(m.code(60s), 0) << m.all();
  const std::string out = m.out(), err = m.err();
  // The replacement got what the lost one had, and MCI_REPLACEMENT=1.
  const std::string first = line_of(out, "[rank 1] MCI_ON_RANK_LOSS=replace RANK=1 LOCAL_RANK=1 ");
  const std::string again = line_of(out, "MCI_REPLACEMENT=1");
  ASSERT_FALSE(first.empty()) << out;
  ASSERT_FALSE(again.empty()) << out;
  EXPECT_EQ(again, first.substr(0, first.rfind("MCI_REPLACEMENT=unset")) + "MCI_REPLACEMENT=1") << out;
  for (int r : {0, 2}) {
    EXPECT_TRUE(contains(out, fmt::format("[rank {}] MCI_ON_RANK_LOSS=replace RANK={} LOCAL_RANK={} ", r, r, r)))
        << out;
    EXPECT_TRUE(contains(out, fmt::format("[rank {}] rank {}: end\n", r, r))) << out;
  }
  EXPECT_FALSE(contains(out, "MCI_REPLACEMENT=2")) << out;
  EXPECT_TRUE(contains(out, "[rank 1] rank 1: replacement 1 end\n")) << "relayed with its rank's prefix: " << out;
  const std::string lost = slurp(m.dir() + "/lost"), pid = lost.substr(0, lost.find('\n'));
  const std::string fresh = slurp(m.dir() + "/replaced"), new_pid = fresh.substr(0, fresh.find('\n'));
  EXPECT_TRUE(contains(err, fmt::format("mcirun: rank 1 (pid {} on {}) was lost at ", pid, host_name()))) << err;
  EXPECT_TRUE(contains(err, fmt::format("(signal SIGKILL); --on-rank-loss=replace: started pid {} in its place "
                                        "(replacement 1)\n",
                                        new_pid)))
      << err;
  EXPECT_TRUE(contains(err, "1 process(es) lost on node 0 (host ")) << err;
  EXPECT_TRUE(contains(err, fmt::format("mcirun:   rank 1 (pid {} on {}): signal SIGKILL, lost at ", pid, host_name())))
      << err;
  EXPECT_TRUE(contains(err, fmt::format("; replaced by pid {} (replacement 1)\n", new_pid))) << err;
  EXPECT_TRUE(contains(err,
                       "the job went on with 1 replacement(s) for 1 lost process(es): its 3 process(es) still "
                       "running at the end (rank(s) 0, 1 (replacement 1), 2) exited 0"))
      << err;
  EXPECT_FALSE(contains(err, "sent SIGTERM to rank")) << "no survivor was stopped: " << err;
  ASSERT_GT(helper.pid(), 0) << m.all();
  EXPECT_TRUE(!process_alive(helper.pid())) << "the lost rank's helper outlived mcirun: " << m.all();
}

// Rank 1 fails at every start: its first loss is replaced, the second is
// past the cap (--max-restarts=1) and goes as under continue. The others
// wait for both losses (each dying process's pid reaped), then exit 0.
TEST(RankLoss, ReplaceStopsReplacingAtTheCap) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=3", "--on-rank-loss=replace", "--max-restarts=1"},
                        "D=$TEST_DIR; N=${MCI_REPLACEMENT:-0};"
                        "if [ $RANK = 1 ]; then echo $$ > $D/lost$N.tmp; mv $D/lost$N.tmp $D/lost$N;"
                        " echo rank 1 start $N dies >&2; exit 3; fi;"
                        "for n in 0 1; do while [ ! -s $D/lost$n ]; do sleep 0.01; done;"
                        " while kill -0 $(cat $D/lost$n) 2>/dev/null; do sleep 0.01; done; done;"
                        "echo rank $RANK: end"));
  ASSERT_EQ(m.code(60s), 0) << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(m.out(), "rank 0: end\n")) << m.all();
  EXPECT_TRUE(contains(m.out(), "rank 2: end\n")) << m.all();
  EXPECT_FALSE(m.has_file("lost2")) << "one replacement only: " << m.all();
  EXPECT_TRUE(contains(err, "(exit code 3); --on-rank-loss=replace: started pid ")) << err;
  EXPECT_TRUE(contains(err,
                       "(exit code 3); --on-rank-loss=replace: not replaced: the cap of 1 replacement(s) on this node "
                       "is reached (--max-restarts=1); as with continue, the 2 other rank(s) go on\n"))
      << err;
  EXPECT_TRUE(contains(err, ", replacement 1) was lost at ")) << err;
  EXPECT_FALSE(contains(err, "(replacement 2)")) << err;
  EXPECT_TRUE(contains(err, "2 process(es) lost on node 0")) << err;
  EXPECT_TRUE(contains(err, "last 1 line(s) of rank 1 (replacement 1)'s stderr:\nmcirun: | rank 1 start 1 dies"))
      << err;
  EXPECT_TRUE(contains(err,
                       "the job went on with 1 replacement(s) for 2 lost process(es): its 2 process(es) still "
                       "running at the end (rank(s) 0, 2) exited 0"))
      << err;
}

// A replacement joins the ranks still running: with none left (here the
// job's only rank), none is started, and the job ends at once rather than
// leaving a replacement to wait out its join timeout.
TEST(RankLoss, ReplaceStartsNoneWhenNoRankIsLeftToJoin) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=1", "--on-rank-loss=replace"},
                        "if [ -n \"$MCI_REPLACEMENT\" ]; then echo replaced > $TEST_DIR/replaced; fi; exit 3"));
  ASSERT_NE(m.code(60s), 0) << m.all();
  EXPECT_FALSE(m.has_file("replaced")) << m.all();
  EXPECT_TRUE(contains(m.err(),
                       "(exit code 3); --on-rank-loss=replace: not replaced: no rank of the job is still running for "
                       "it to join; as with continue, no other rank of this node is still running\n"))
      << m.all();
}

TEST(RankLoss, EveryRankLostFailsTheJob) {
  Mcirun m(with_program({"--standalone", "--nproc_per_node=2", "--on-rank-loss=continue"}, "exit 5"));
  ASSERT_EQ(m.code(60s), 1) << m.all();
  EXPECT_TRUE(contains(m.err(), "2 rank(s) lost on node 0")) << m.all();
  EXPECT_TRUE(contains(m.err(), "job failed: every rank was lost")) << m.all();
}

Strings node(int n, int port, const std::string& policy, const std::string& script) {
  Strings flags{"--nnodes=2", fmt::format("--node_rank={}", n), "--nproc_per_node=2", "--master_addr=127.0.0.1",
                fmt::format("--master_port={}", port)};
  if (!policy.empty()) flags.push_back("--on-rank-loss=" + policy);
  return with_program(flags, script);
}

// Two launchers on this host, one per node: rank 3 (node 1) is lost, and
// neither node stops anything for it.
TEST(RankLoss, ContinueAcrossNodes) {
  mci::test::TempDir shared;
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
  // Node 0, which holds the store, says once that its own loss would end the
  // job all the same, and how to avoid that; node 1 holds nothing to say it of.
  const std::string spof = "this node (node 0) holds the job's store: losing it ends the job";
  EXPECT_TRUE(contains(n0.err(), spof)) << n0.all();
  EXPECT_EQ(n0.err().find(spof), n0.err().rfind(spof)) << n0.all();
  EXPECT_TRUE(contains(n0.err(), "--rdzv_backend=etcd-v2")) << n0.all();
  EXPECT_FALSE(contains(n1.err(), "holds the job's store")) << n1.all();
  ASSERT_GT(helper.pid(), 0) << n1.all();
  EXPECT_TRUE(!process_alive(helper.pid())) << n1.all();
}

// A whole node lost under continue (its mcirun and its rank SIGKILLed, as
// when its host dies): the other two finish, and node 0, which keeps the
// store up until every node is done, does not wait for the one that is gone
// (it used to wait 300 s, counting it among the nodes still running).
TEST(RankLoss, Node0DoesNotWaitForANodeThatIsGone) {
  mci::test::TempDir shared;
  const int port = free_port();
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "rank-loss-token"},
                                               {"OMP_NUM_THREADS", "1"},
                                               {"SHARED", shared.path()}};
  const std::string script =
      "if [ $RANK = 2 ]; then echo $$ > $SHARED/rank2.tmp; mv $SHARED/rank2.tmp $SHARED/rank2; exec sleep 60; fi;"
      "while [ ! -e $SHARED/gone ]; do sleep 0.01; done; echo rank $RANK: end";
  auto at = [&](int n) {
    return with_program({"--nnodes=3", fmt::format("--node_rank={}", n), "--nproc_per_node=1",
                         "--master_addr=127.0.0.1", fmt::format("--master_port={}", port), "--on-rank-loss=continue"},
                        script);
  };
  Mcirun n0(at(0), env);
  Mcirun n1(at(1), env);
  Mcirun n2(at(2), env);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(shared.path() + "/rank2"); }, 30s)) << n2.all();
  const pid_t rank2 = static_cast<pid_t>(std::stol(slurp(shared.path() + "/rank2")));
  ::kill(n2.pid(), SIGKILL);
  ::kill(rank2, SIGKILL);
  EXPECT_EQ(n2.code(), 1000 + SIGKILL);
  std::ofstream(shared.path() + "/gone") << "1";
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  EXPECT_TRUE(contains(n0.out(), "rank 0: end\n")) << n0.all();
  EXPECT_TRUE(contains(n0.err(), "node 2's mcirun is gone before its processes finished")) << n0.all();
}

// Under replace, each node replaces its own: rank 3 (node 1) is lost and
// replaced there, while node 0's ranks wait for the replacement's end.
TEST(RankLoss, ReplaceAcrossNodes) {
  mci::test::TempDir shared;
  const int port = free_port();
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "rank-loss-token"},
                                               {"OMP_NUM_THREADS", "1"},
                                               {"SHARED", shared.path()},
                                               {"LOSE", "3"}};
  Mcirun n0(node(0, port, "replace", kReplaceOne), env);
  Mcirun n1(node(1, port, "replace", kReplaceOne), env);
  Helper helper(shared.path() + "/child");
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  for (int r : {0, 1}) EXPECT_TRUE(contains(n0.out(), fmt::format("rank {}: end\n", r))) << n0.all();
  EXPECT_TRUE(contains(n1.out(), "rank 2: end\n")) << n1.all();
  EXPECT_TRUE(contains(n1.out(), "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 ")) << n1.all();
  EXPECT_TRUE(contains(n1.out(), "rank 3: replacement 1 end\n")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "--on-rank-loss=replace: started pid ")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "node 1 (host ")) << n1.all();
  EXPECT_TRUE(contains(n1.err(),
                       "went on with 1 replacement(s) for 1 lost process(es): its 2 process(es) still "
                       "running at the end (rank(s) 2, 3 (replacement 1)) exited 0"))
      << n1.all();
  EXPECT_FALSE(contains(n0.err(), "lost")) << "node 0 lost nothing: " << n0.all();
  ASSERT_GT(helper.pid(), 0) << n1.all();
  EXPECT_TRUE(!process_alive(helper.pid())) << n1.all();
}

// A node given another policy than node 0's starts nothing and says why;
// node 0 stops its ranks rather than wait for that node's.
TEST(RankLoss, TheNodesMustAgree) {
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "rank-loss-token"}, {"OMP_NUM_THREADS", "1"}};
  const std::vector<std::pair<std::string, std::string>> pairs{{"", "continue"}, {"replace", "continue"}};
  for (const auto& [policy0, policy1] : pairs) {
    const int port = free_port();
    Mcirun n0(node(0, port, policy0, "exec sleep 30"), env);
    Mcirun n1(node(1, port, policy1, "touch $TEST_DIR/ran; exec sleep 30"), env);
    ASSERT_EQ(n1.code(60s), 1) << n0.all() << n1.all();
    ASSERT_EQ(n0.code(60s), 1) << n0.all() << n1.all();
    const std::string why = fmt::format(
        "--on-rank-loss={} on node 1 (host {}), but node 0 runs with --on-rank-loss={}: give every node the same "
        "--on-rank-loss",
        policy1, host_name(), policy0.empty() ? "stop" : policy0);
    EXPECT_TRUE(contains(n1.err(), "mcirun: " + why + "; this node starts nothing")) << n1.all();
    EXPECT_FALSE(n1.has_file("ran")) << n1.all();
    EXPECT_TRUE(contains(n0.err(), "another node failed, node 1: " + why)) << n0.all();
    EXPECT_FALSE(contains(n0.err(), "replacement")) << "a stop replaces no one: " << n0.all();
  }
}

}  // namespace
}  // namespace mci::test
