// Stopping a job from outside: Ctrl-C (SIGINT) to mcirun reaches every
// rank as SIGINT, so a Python program's `except KeyboardInterrupt:` and
// `finally:` run; a rank that does not end is sent SIGTERM, then SIGKILL,
// one grace period apart. And what the failure summary says about a
// Python rank: the interpreter that could not import a module, and a
// traceback that went to stdout.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/temp_dir.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

// The scripts live outside mcirun's TEST_DIR, which exists only once mcirun
// is started.
class Script {
 public:
  Script(const std::string& name, const std::string& text) : path_(dir_.file(name, text)) {}
  const std::string& path() const { return path_; }

 private:
  test::TempDir dir_;
  std::string path_;
};

// Each rank records its pid once it is inside its `try:` (written aside,
// then renamed, so the test never reads half a file), then waits for a
// signal. RANK_IGNORES names, per rank, the signals it ignores ("1:INT,TERM").
constexpr const char* kCheckpointScript = R"(import os, signal, sys
d = os.environ["TEST_DIR"]
rank = os.environ["RANK"]

def mark(name, text=""):
    with open(os.path.join(d, "." + name), "w") as f:
        f.write(text)
    os.rename(os.path.join(d, "." + name), os.path.join(d, name))

for spec in os.environ.get("RANK_IGNORES", "").split(";"):
    who, _, sigs = spec.partition(":")
    if who == rank:
        for s in sigs.split(","):
            signal.signal(getattr(signal, "SIG" + s), signal.SIG_IGN)
try:
    mark("ready." + rank, str(os.getpid()) + "\n")
    while True:
        signal.pause()
except KeyboardInterrupt:
    mark("checkpoint." + rank, "saved\n")
    raise
finally:
    mark("finally." + rank, "done\n")
)";

class LauncherSignals : public ::testing::Test {
  DefaultSigint sigint_;
};

bool all_ready(const Mcirun& m, int n) {
  for (int r = 0; r < n; ++r) {
    if (!m.has_file("ready." + std::to_string(r))) return false;
  }
  return true;
}

std::string pid_of(const Mcirun& m, int rank) { return lines_of(m.file("ready." + std::to_string(rank))).at(0); }

TEST_F(LauncherSignals, CtrlCIsAKeyboardInterruptInEveryRankAndExitStatus130) {
  Script script("train.py", kCheckpointScript);
  Mcirun m({"--standalone", "--nproc_per_node=2", script.path()}, {{"MCI_PYTHON", kPython}});
  ASSERT_TRUE(eventually([&] { return all_ready(m, 2); }, 20s)) << m.all();
  const std::string p0 = pid_of(m, 0), p1 = pid_of(m, 1);
  ASSERT_EQ(::kill(m.pid(), SIGINT), 0);
  ASSERT_EQ(m.code(), 130) << m.all();
  const std::string err = m.err();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(m.file(fmt::format("checkpoint.{}", r)), "saved\n")
        << "rank " << r << "'s except KeyboardInterrupt: " << m.all();
    EXPECT_EQ(m.file(fmt::format("finally.{}", r)), "done\n") << "rank " << r << "'s finally: " << m.all();
  }
  EXPECT_TRUE(contains(err, "mcirun: received SIGINT: stopping the job")) << err;
  EXPECT_TRUE(contains(err, "mcirun: sent SIGINT to rank 0 (pid " + p0 + ")\n")) << err;
  EXPECT_TRUE(contains(err, "mcirun: sent SIGINT to rank 1 (pid " + p1 + ")\n")) << err;
  EXPECT_FALSE(contains(err, "SIGTERM")) << "the ranks ended on SIGINT: " << err;
  EXPECT_FALSE(contains(err, "SIGKILL")) << err;
  // Python re-raises an unhandled KeyboardInterrupt as death by SIGINT.
  EXPECT_TRUE(contains(err, "rank 0 (pid " + p0 + "): signal SIGINT (sent by mcirun)")) << err;
  EXPECT_TRUE(contains(err, "job stopped by SIGINT sent to mcirun")) << err;
  EXPECT_TRUE(contains(err, "KeyboardInterrupt")) << "the ranks' tracebacks are relayed: " << err;
  for (const auto& p : {p0, p1}) EXPECT_FALSE(process_alive(std::stoi(p))) << "pid " << p;
}

TEST_F(LauncherSignals, ARankThatIgnoresCtrlCGetsSigtermThenSigkillOneGraceApart) {
  // Rank 0 takes the KeyboardInterrupt; rank 1 ignores SIGINT and dies of
  // the SIGTERM that follows; rank 2 ignores both and is killed.
  Script script("stubborn.py", kCheckpointScript);
  Mcirun m({"--standalone", "--nproc_per_node=3", "--grace=0.5", script.path()},
           {{"MCI_PYTHON", kPython}, {"RANK_IGNORES", "1:INT;2:INT,TERM"}});
  ASSERT_TRUE(eventually([&] { return all_ready(m, 3); }, 20s)) << m.all();
  const std::string p0 = pid_of(m, 0), p1 = pid_of(m, 1), p2 = pid_of(m, 2);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(m.pid(), SIGINT), 0);
  ASSERT_EQ(m.code(), 130) << m.all();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  const std::string err = m.err();
  EXPECT_TRUE(m.has_file("checkpoint.0")) << m.all();
  EXPECT_FALSE(m.has_file("checkpoint.1")) << "rank 1 ignored SIGINT: " << m.all();
  EXPECT_TRUE(contains(err, "sent SIGINT to rank 1 (pid " + p1 + ")\n")) << err;
  EXPECT_TRUE(contains(err, "sent SIGTERM to rank 1 (pid " + p1 + "): still running 0.5 s after SIGINT")) << err;
  EXPECT_TRUE(contains(err, "sent SIGTERM to rank 2 (pid " + p2 + "): still running 0.5 s after SIGINT")) << err;
  EXPECT_TRUE(contains(err, "sent SIGKILL to rank 2 (pid " + p2 + "): still running 0.5 s after SIGTERM")) << err;
  EXPECT_FALSE(contains(err, "sent SIGTERM to rank 0")) << "rank 0 was gone by then: " << err;
  EXPECT_FALSE(contains(err, "sent SIGKILL to rank 1")) << "rank 1 was gone by then: " << err;
  EXPECT_LT(err.find("sent SIGTERM to rank 2"), err.find("sent SIGKILL to rank 2")) << err;
  EXPECT_TRUE(contains(err, "rank 1 (pid " + p1 + "): signal SIGTERM (sent by mcirun)")) << err;
  EXPECT_TRUE(contains(err, "rank 2 (pid " + p2 + "): signal SIGKILL (sent by mcirun)")) << err;
  EXPECT_GE(took, 1.0) << "SIGKILL one grace after SIGTERM, itself one grace after SIGINT";
  EXPECT_LT(took, 5.0) << "--grace=0.5, not the default 3 s";
  for (const auto& p : {p0, p1, p2}) EXPECT_FALSE(process_alive(std::stoi(p))) << "pid " << p;
}

TEST_F(LauncherSignals, SigtermIsPassedOnAsSigtermThenSigkill) {
  // Rank 1 ignores SIGTERM: after the grace, SIGKILL (no SIGINT, no second SIGTERM).
  Script script("term.py", kCheckpointScript);
  Mcirun m({"--standalone", "--nproc_per_node=2", "--grace=0.5", script.path()},
           {{"MCI_PYTHON", kPython}, {"RANK_IGNORES", "1:TERM"}});
  ASSERT_TRUE(eventually([&] { return all_ready(m, 2); }, 20s)) << m.all();
  const std::string p0 = pid_of(m, 0), p1 = pid_of(m, 1);
  ASSERT_EQ(::kill(m.pid(), SIGTERM), 0);
  ASSERT_EQ(m.code(), 128 + SIGTERM) << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "sent SIGTERM to rank 0 (pid " + p0 + ")\n")) << err;
  EXPECT_TRUE(contains(err, "sent SIGKILL to rank 1 (pid " + p1 + "): still running 0.5 s after SIGTERM")) << err;
  EXPECT_FALSE(contains(err, "sent SIGINT")) << err;
  EXPECT_FALSE(m.has_file("checkpoint.0")) << "SIGTERM is not a KeyboardInterrupt";
  for (const auto& p : {p0, p1}) EXPECT_FALSE(process_alive(std::stoi(p))) << "pid " << p;
}

// A stopped rank (SIGSTOP, a debugger's stop) keeps SIGTERM pending until
// it runs again: mcirun sends SIGCONT after it, so the rank takes its
// SIGTERM (its handler runs) within the grace period, instead of being
// killed at its end (or staying stopped).
TEST(LauncherStopped, AStoppedRankReceivesTheSigtermOfAStop) {
  Mcirun m({"--standalone", "--nproc_per_node=2", "--grace=20", "/bin/sh", "-c",
            "trap 'touch $TEST_DIR/term.$RANK; exit 7' TERM; echo $$ > $TEST_DIR/pid.tmp.$RANK;"
            " mv $TEST_DIR/pid.tmp.$RANK $TEST_DIR/pid.$RANK; if [ $RANK = 1 ]; then kill -STOP $$; fi;"
            " while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return m.has_file("pid.0") && m.has_file("pid.1"); }, 20s)) << m.all();
  const pid_t stopped = std::stoi(m.file("pid.1"));
  ASSERT_TRUE(
      eventually([&] { return slurp("/proc/" + std::to_string(stopped) + "/stat").find(") T ") != std::string::npos; },
                 20s))
      << "rank 1 did not stop";
  ASSERT_EQ(::kill(m.pid(), SIGTERM), 0);
  ASSERT_EQ(m.code(), 128 + SIGTERM) << m.all();
  EXPECT_TRUE(m.has_file("term.1")) << "the stopped rank never ran its SIGTERM handler: " << m.all();
  EXPECT_FALSE(contains(m.err(), "sent SIGKILL to rank 1")) << m.all();
}

// mcirun itself killed by SIGKILL (the OOM killer, a scheduler): its ranks
// die with it, and so does what they started in their process groups (the
// guardian ends them, guardian.hpp), and its own temporary folder goes. They
// used to be left: a rank's child kept running, mcirun-errors-* stayed.
TEST(LauncherKilled, NothingOfTheJobOutlivesMcirun) {
  mci::test::TempDir tmp;  // mcirun's TMPDIR: where its error folder lands
  Mcirun m({"--standalone", "--nproc_per_node=2", "/bin/sh", "-c",
            "sleep 60 & echo $! > $TEST_DIR/child.tmp.$RANK; mv $TEST_DIR/child.tmp.$RANK $TEST_DIR/child.$RANK;"
            " echo $$ > $TEST_DIR/rank.tmp.$RANK; mv $TEST_DIR/rank.tmp.$RANK $TEST_DIR/rank.$RANK; wait"},
           {{"TMPDIR", tmp.path()}});
  ASSERT_TRUE(eventually(
      [&] { return m.has_file("child.0") && m.has_file("child.1") && m.has_file("rank.0") && m.has_file("rank.1"); },
      30s))
      << m.all();
  auto folders = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
      n += e.path().filename().string().rfind("mcirun-errors-", 0) == 0;
    }
    return n;
  };
  ASSERT_EQ(folders(), 1) << "mcirun keeps its error files in a folder of TMPDIR";
  std::vector<pid_t> pids;
  for (const char* f : {"child.0", "child.1", "rank.0", "rank.1"}) pids.push_back(std::stoi(m.file(f)));
  ::kill(m.pid(), SIGKILL);
  EXPECT_EQ(m.code(), 1000 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }, 10s))
      << "a rank or its child outlived mcirun";
  EXPECT_TRUE(eventually([&] { return folders() == 0; }, 10s)) << "mcirun's error folder stayed in " << tmp.path();
  for (pid_t p : pids) ::kill(p, SIGKILL);  // whatever the outcome, nothing of the test stays
}

// A rank killed between creating its host's shared-memory segment and the
// moment every rank of the host mapped it (when the name is unlinked) left
// the name in /dev/shm (the fault matrix's SIGTERM during init found it):
// mcirun removes what each rank it started left, by the creator's pid in
// the name (common/shm_names.hpp); and the guardian does when mcirun itself
// is killed.
TEST(LauncherShm, TheSegmentsOfALostRankAreRemoved) {
  Mcirun m({"--standalone", "--nproc_per_node=1", "/bin/sh", "-c",
            "touch /dev/shm/mci-$$-0badf00d; echo $$ > $TEST_DIR/rank.tmp; mv $TEST_DIR/rank.tmp $TEST_DIR/rank;"
            " kill -KILL $$"});
  EXPECT_NE(m.code(), 0) << m.all();
  ASSERT_TRUE(m.has_file("rank")) << m.all();
  const std::string left = "/dev/shm/mci-" + std::to_string(std::stoi(m.file("rank"))) + "-0badf00d";
  EXPECT_FALSE(std::filesystem::exists(left)) << m.all();
  std::filesystem::remove(left);
}

TEST(LauncherShm, TheSegmentsOfTheRanksOfAKilledMcirunAreRemoved) {
  Mcirun m({"--standalone", "--nproc_per_node=2", "/bin/sh", "-c",
            "touch /dev/shm/mci-$$-0badf00d; echo $$ > $TEST_DIR/rank.tmp.$RANK;"
            " mv $TEST_DIR/rank.tmp.$RANK $TEST_DIR/rank.$RANK; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return m.has_file("rank.0") && m.has_file("rank.1"); }, 30s)) << m.all();
  std::vector<std::string> left;
  for (const char* f : {"rank.0", "rank.1"}) {
    left.push_back("/dev/shm/mci-" + std::to_string(std::stoi(m.file(f))) + "-0badf00d");
    ASSERT_TRUE(std::filesystem::exists(left.back()));
  }
  ::kill(m.pid(), SIGKILL);
  EXPECT_EQ(m.code(), 1000 + SIGKILL);
  EXPECT_TRUE(eventually(
      [&] { return std::none_of(left.begin(), left.end(), [](const auto& f) { return std::filesystem::exists(f); }); },
      10s))
      << "a rank's segment stayed in /dev/shm after mcirun was killed";
  for (const auto& f : left) std::filesystem::remove(f);
}

TEST(LauncherPython, AMissingModuleNamesTheInterpreterAndHowToChooseAnother) {
  Script script("needs_torch.py", "import mci_test_no_such_module\n");
  {
    Mcirun m({"--standalone", script.path()}, {{"MCI_PYTHON", kPython}});
    ASSERT_EQ(m.code(), 1) << m.all();
    const std::string err = m.err();
    EXPECT_TRUE(contains(err, "No module named 'mci_test_no_such_module'")) << err;
    EXPECT_TRUE(contains(err, fmt::format("mcirun: rank 0 ran under the Python interpreter {} (chosen by MCI_PYTHON), "
                                          "which cannot import 'mci_test_no_such_module'",
                                          kPython)))
        << err;
    EXPECT_TRUE(contains(err, "MCI_PYTHON=/path/to/python")) << err;
    EXPECT_TRUE(contains(err, "mcirun [OPTIONS] /path/to/python script.py")) << err;
  }
  {
    // The interpreter named before the script.
    Mcirun m({"--standalone", kPython, script.path()});
    ASSERT_EQ(m.code(), 1) << m.all();
    EXPECT_TRUE(
        contains(m.err(), fmt::format("ran under the Python interpreter {} (named on the command line)", kPython)))
        << m.all();
  }
  {
    // Not Python: nothing about interpreters, whatever the output says.
    Mcirun m({"--standalone", "/bin/sh", "-c", "echo \"No module named 'x'\" >&2; exit 1"});
    ASSERT_EQ(m.code(), 1) << m.all();
    EXPECT_FALSE(contains(m.err(), "Python interpreter")) << m.all();
  }
}

TEST(LauncherPython, ATracebackOnStdoutIsQuotedWhenStderrIsEmpty) {
  Script script("prints.py",
                "import sys, traceback\n"
                "try:\n    raise ValueError('bad batch size')\n"
                "except ValueError:\n    traceback.print_exc(file=sys.stdout)\n    sys.exit(2)\n");
  Mcirun m({"--standalone", script.path()}, {{"MCI_PYTHON", kPython}});
  ASSERT_EQ(m.code(), 1) << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "line(s) of rank 0's stdout:\n")) << err;
  EXPECT_TRUE(contains(err, "mcirun: | ValueError: bad batch size\n")) << err;
  EXPECT_FALSE(contains(err, "wrote nothing")) << err;
}

TEST(LauncherPython, OnlyARankSilentOnBothStreamsWroteNothing) {
  Mcirun m({"--standalone", "/bin/sh", "-c", "exit 4"});
  ASSERT_EQ(m.code(), 1) << m.all();
  EXPECT_TRUE(contains(m.err(), "mcirun: rank 0 wrote nothing on stderr or stdout\n")) << m.all();
}

}  // namespace
}  // namespace mci::test
