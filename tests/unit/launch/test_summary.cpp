#include <gtest/gtest.h>

#include <signal.h>

#include "launch/output/summary.hpp"

namespace mci::launch {
namespace {

int exited(int code) { return code << 8; }
int killed(int sig, bool core = false) { return sig | (core ? 0x80 : 0); }

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) {
    EXPECT_EQ(l.rfind("mcirun: ", 0), 0u) << l;
    EXPECT_EQ(l.find('\n'), std::string::npos) << l;
    s += l + "\n";
  }
  return s;
}

TEST(Summary, DescribesExitCodesAndSignals) {
  EXPECT_EQ(describe_exit(exited(0)), "exit code 0");
  EXPECT_EQ(describe_exit(exited(3)), "exit code 3");
  EXPECT_EQ(describe_exit(killed(SIGSEGV)), "signal SIGSEGV");
  EXPECT_EQ(describe_exit(killed(SIGABRT, true)), "signal SIGABRT (core dumped)");
  EXPECT_TRUE(exited_ok(exited(0)));
  EXPECT_FALSE(exited_ok(exited(1)));
  EXPECT_FALSE(exited_ok(killed(SIGTERM)));
}

TEST(Summary, NamesTheFirstFailureWhereItRanAndItsLastStderrLines) {
  JobReport r;
  r.host = "node07";
  r.node_rank = 1;
  r.ranks.resize(3);
  for (int i = 0; i < 3; ++i) {
    r.ranks[i].rank = 4 + i;
    r.ranks[i].local_rank = i;
    r.ranks[i].pid = 1000 + i;
  }
  r.ranks[0].wait_status = killed(SIGTERM);
  r.ranks[0].signal_sent = SIGTERM;
  r.ranks[1].wait_status = exited(7);
  r.ranks[1].stderr_tail = {"Traceback", "RuntimeError: Timed out waiting 8000ms", "", "  "};
  r.ranks[2].wait_status = exited(1);
  r.ranks[2].signal_sent = SIGKILL;
  r.first_failure = 1;
  const std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("job failed: rank 5 (local rank 1, node 1, host node07, pid 1001) ended with exit code 7"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("rank 4 (pid 1000): signal SIGTERM (sent by mcirun)"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 6 (pid 1002): exit code 1 (after mcirun sent SIGKILL)"), std::string::npos) << s;
  EXPECT_NE(s.find("last 2 line(s) of rank 5's stderr:\nmcirun: | Traceback\nmcirun: | RuntimeError: Timed out "
                   "waiting 8000ms\nmcirun: ===="),
            std::string::npos)
      << "trailing blank lines dropped: " << s;
  EXPECT_EQ(s.find("rank 5 (pid"), std::string::npos) << "the failed rank is not listed twice: " << s;
}

TEST(Summary, OtherCausesOfAFailedJob) {
  JobReport r;
  r.host = "h";
  r.ranks.resize(1);
  r.ranks[0].pid = 42;
  r.ranks[0].wait_status = killed(SIGTERM);
  r.ranks[0].signal_sent = SIGTERM;
  r.stop_signal = SIGINT;
  EXPECT_NE(joined(summary_lines(r)).find("job stopped by SIGINT sent to mcirun (node 0, host h)"), std::string::npos);
  r.stop_signal.reset();
  r.peer_failure = "node 1: rank 3 (pid 9 on b) failed: exit code 1";
  EXPECT_NE(joined(summary_lines(r)).find("job failed on another node: node 1: rank 3"), std::string::npos);
  // This node's own store lost (on etcd: its quorum gone) is not another node's failure.
  r.peer_failure = "this node lost the job's store on etcd: the job's store on etcd could not be reached";
  r.store_lost = true;
  const std::string lost = joined(summary_lines(r));
  EXPECT_NE(lost.find("mcirun: job failed: this node lost the job's store on etcd"), std::string::npos) << lost;
  EXPECT_EQ(lost.find("another node"), std::string::npos) << lost;
  r.store_lost = false;
  r.peer_failure.clear();
  r.start_error = "rank 1 could not start: cannot run 'x': Permission denied";
  EXPECT_NE(joined(summary_lines(r)).find("job failed on node 0 (host h): rank 1 could not start"), std::string::npos);
}

// --on-rank-loss=continue: each lost rank with when and why, then the survivors.
TEST(Summary, ListsEachLostRankAndHowTheSurvivorsEnded) {
  JobReport r;
  r.host = "node07";
  r.on_rank_loss_continue = true;
  r.ranks.resize(3);
  for (int i = 0; i < 3; ++i) {
    r.ranks[i].rank = i;
    r.ranks[i].pid = 1000 + i;
    r.ranks[i].wait_status = exited(0);
  }
  r.ranks[1].wait_status = killed(SIGKILL);
  r.ranks[1].lost_at = std::chrono::milliseconds(12345);
  r.ranks[1].stderr_tail = {"about to die"};
  r.lost = {1};
  std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("1 rank(s) lost on node 0 (host node07), --on-rank-loss=continue:\n"
                   "mcirun:   rank 1 (pid 1001 on node07): signal SIGKILL, lost at 12.3 s\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("last 1 line(s) of rank 1's stderr:\nmcirun: | about to die"), std::string::npos) << s;
  EXPECT_NE(s.find("the job went on without 1 lost rank(s): its 2 survivor(s) (rank(s) 0, 2) exited 0"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("job failed"), std::string::npos) << s;

  r.multi_node = true;
  EXPECT_NE(joined(summary_lines(r)).find("node 0 (host node07) went on without 1 lost rank(s)"), std::string::npos);

  for (int i : {0, 2}) {
    r.ranks[i].wait_status = exited(3);
    r.ranks[i].lost_at = std::chrono::milliseconds(20000);
  }
  r.lost = {1, 0, 2};
  r.multi_node = false;
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("3 rank(s) lost"), std::string::npos) << s;
  EXPECT_NE(s.find("job failed: every rank was lost"), std::string::npos) << s;

  r.ranks[2].lost_at.reset();  // a survivor still running when mcirun was stopped
  r.ranks[2].wait_status = killed(SIGTERM);
  r.ranks[2].signal_sent = SIGTERM;
  r.lost = {1, 0};
  r.stop_signal = SIGTERM;
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("job stopped by SIGTERM"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 2 (pid 1002): signal SIGTERM (sent by mcirun)"), std::string::npos) << s;
  EXPECT_NE(s.find("2 rank(s) lost"), std::string::npos) << s;
  EXPECT_EQ(s.find("survivor"), std::string::npos) << "a stop is no survivors' outcome: " << s;
}

// --on-rank-loss=replace: each loss with its replacement, or why it has none;
// a replacement is named as such wherever its rank alone would be ambiguous.
TEST(Summary, ListsEachLossWithItsReplacement) {
  JobReport r;
  r.host = "node07";
  r.on_rank_loss_continue = true;
  r.replace = true;
  r.ranks.resize(4);
  for (int i = 0; i < 3; ++i) {
    r.ranks[i].rank = i;
    r.ranks[i].pid = 1000 + i;
    r.ranks[i].wait_status = exited(0);
  }
  r.ranks[1].wait_status = killed(SIGKILL);
  r.ranks[1].lost_at = std::chrono::milliseconds(12345);
  r.ranks[1].replaced_by = 3;
  r.ranks[3].rank = 1;
  r.ranks[3].pid = 1003;
  r.ranks[3].replacement = 1;
  r.ranks[3].wait_status = exited(0);
  r.lost = {1};
  std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("1 process(es) lost on node 0 (host node07), --on-rank-loss=replace:\n"
                   "mcirun:   rank 1 (pid 1001 on node07): signal SIGKILL, lost at 12.3 s; replaced by pid 1003 "
                   "(replacement 1)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("the job went on with 1 replacement(s) for 1 lost process(es): its 3 process(es) still running "
                   "at the end (rank(s) 0, 1 (replacement 1), 2) exited 0"),
            std::string::npos)
      << s;

  // The replacement lost too, past the cap.
  r.ranks[3].wait_status = exited(3);
  r.ranks[3].lost_at = std::chrono::milliseconds(14000);
  r.ranks[3].not_replaced = "the cap of 1 replacement(s) on this node is reached (--max-restarts=1)";
  r.ranks[3].stderr_tail = {"dying again"};
  r.lost = {1, 3};
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("mcirun:   rank 1 (pid 1003 on node07, replacement 1): exit code 3, lost at 14.0 s; not replaced: "
                   "the cap of 1 replacement(s) on this node is reached (--max-restarts=1)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("last 1 line(s) of rank 1 (replacement 1)'s stderr:\nmcirun: | dying again"), std::string::npos)
      << s;
  EXPECT_NE(s.find("went on with 1 replacement(s) for 2 lost process(es): its 2 process(es) still running at the "
                   "end (rank(s) 0, 2) exited 0"),
            std::string::npos)
      << s;

  for (int i : {0, 2}) {
    r.ranks[i].wait_status = exited(3);
    r.ranks[i].lost_at = std::chrono::milliseconds(20000);
  }
  r.lost = {1, 3, 0, 2};
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("job failed: every rank and replacement was lost; --on-rank-loss=replace goes on only while one "
                   "is left"),
            std::string::npos)
      << s;
}

TEST(Summary, AHangReportIsNamedNotRepeated) {
  JobReport r;
  r.host = "node0";
  r.ranks.resize(2);
  r.ranks[0].rank = 0;
  r.ranks[0].wait_status = exited(1);
  r.ranks[0].stderr_tail = {"labo: TimeoutError: Timed out waiting 8000ms for all_reduce #1", "",
                            "mci hang report for all_reduce #1 (f32 x 2, sum) on rank 0:",
                            "  rank 1: never entered all_reduce #1"};
  r.ranks[1].rank = 1;
  r.first_failure = 0;
  const std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("mcirun: | labo: TimeoutError: Timed out waiting 8000ms"), std::string::npos) << s;
  EXPECT_EQ(s.find("never entered"), std::string::npos) << s;
  EXPECT_NE(s.find("mcirun: rank 0's hang report is above, in its output"), std::string::npos) << s;
  EXPECT_NE(s.find("last 1 line(s) of rank 0's stderr"), std::string::npos) << s;
}

JobReport one_failed_rank() {
  JobReport r;
  r.host = "h";
  r.ranks.resize(1);
  r.ranks[0].pid = 42;
  r.ranks[0].wait_status = exited(1);
  r.first_failure = 0;
  return r;
}

TEST(Summary, StdoutIsQuotedWhenStderrIsEmpty) {
  JobReport r = one_failed_rank();
  r.ranks[0].stdout_tail = {"step 9", "Traceback (most recent call last):", "ValueError: bad", ""};
  std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("last 3 line(s) of rank 0's stdout:\nmcirun: | step 9\n"), std::string::npos) << s;
  EXPECT_NE(s.find("mcirun: | ValueError: bad\nmcirun: ===="), std::string::npos) << s;
  EXPECT_EQ(s.find("wrote nothing"), std::string::npos) << s;

  r.ranks[0].stderr_tail = {"RuntimeError: on stderr"};
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("last 1 line(s) of rank 0's stderr:"), std::string::npos) << s;
  EXPECT_EQ(s.find("step 9"), std::string::npos) << "stderr, when there is one, is what is quoted: " << s;

  r.ranks[0].stderr_tail = {" "};
  r.ranks[0].stdout_tail = {};
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("mcirun: rank 0 wrote nothing on stderr or stdout\n"), std::string::npos) << s;
}

TEST(Summary, AMissingModuleNamesThePythonInterpreterAndTheWayToChooseAnother) {
  JobReport r = one_failed_rank();
  r.ranks[0].stderr_tail = {"Traceback (most recent call last):", "  File \"train.py\", line 1, in <module>",
                            "ModuleNotFoundError: No module named 'torch'"};
  r.python = "/usr/bin/python3";
  r.python_from = "PATH";
  std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("mcirun: rank 0 ran under the Python interpreter /usr/bin/python3 (python3 found on PATH), "
                   "which cannot import 'torch'\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("set MCI_PYTHON=/path/to/python"), std::string::npos) << s;
  EXPECT_NE(s.find("mcirun [OPTIONS] /path/to/python script.py"), std::string::npos) << s;

  r.python_from = "MCI_PYTHON";
  r.ranks[0].stderr_tail.clear();
  r.ranks[0].stdout_tail = {"ModuleNotFoundError: No module named 'torch.distributed'"};
  s = joined(summary_lines(r));
  EXPECT_NE(s.find("(chosen by MCI_PYTHON), which cannot import 'torch.distributed'"), std::string::npos) << s;

  r.python.clear();  // not a Python program: no advice about interpreters
  EXPECT_EQ(joined(summary_lines(r)).find("interpreter"), std::string::npos);

  r.python = "/usr/bin/python3";
  r.ranks[0].stdout_tail = {"RuntimeError: something else"};
  EXPECT_EQ(joined(summary_lines(r)).find("interpreter"), std::string::npos) << "only for a missing module";
}

TEST(Summary, BackendMciAskedForBeforeImportingMciTorchSaysToImportIt) {
  JobReport r = one_failed_rank();
  r.python = "/usr/bin/python3";
  r.python_from = "PATH";
  const std::string hint = "add `import mci_torch` before init_process_group";
  for (const char* line : {"ValueError: Invalid backend: 'mci'", "AssertionError: Unknown backend type mci"}) {
    r.ranks[0].stderr_tail = {"Traceback (most recent call last):", line};
    const std::string s = joined(summary_lines(r));
    EXPECT_NE(s.find("mcirun: rank 0 asked torch for backend \"mci\" before importing mci_torch"), std::string::npos)
        << s;
    EXPECT_NE(s.find(hint), std::string::npos) << s;
  }
  r.ranks[0].stderr_tail = {"ValueError: Invalid backend: 'nccl2'"};
  EXPECT_EQ(joined(summary_lines(r)).find(hint), std::string::npos) << "only for backend mci";
}

TEST(Summary, AStopPassedOnFromAnotherNodeSaysWhere) {
  JobReport r;
  r.host = "b";
  r.node_rank = 1;
  r.ranks.resize(1);
  r.ranks[0].pid = 7;
  r.ranks[0].wait_status = killed(SIGINT);
  r.ranks[0].signal_sent = SIGINT;
  r.stop_signal = SIGINT;
  r.stop_origin = "node 0 (host a)";
  const std::string s = joined(summary_lines(r));
  EXPECT_NE(s.find("job stopped by SIGINT sent to mcirun on node 0 (host a); node 1 (host b) passed it on"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("rank 0 (pid 7): signal SIGINT (sent by mcirun)"), std::string::npos) << s;
}

}  // namespace
}  // namespace mci::launch
