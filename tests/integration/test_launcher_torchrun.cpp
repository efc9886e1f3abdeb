// mcirun with torchrun 2.15's flags, run as a torchrun user runs them: the
// log folder (--log-dir, -r, -t, --local-ranks-filter, the prefix template,
// the duplicate filters), -m and --run-path, the PET_ twins, the signals it
// passes on, the notices for what has no meaning here, shell completion.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/temp_dir.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

Strings sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

Strings sorted(Strings v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The one RUN_ID_XXXXXX folder mcirun made under base.
fs::path run_folder(const std::string& base) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(base)) runs.push_back(e.path());
  EXPECT_EQ(runs.size(), 1u) << base;
  return runs.empty() ? fs::path() : runs.front();
}

TEST(LauncherTorchrun, LogDirHoldsEachStreamWhereRedirectsAndTeeSendIt) {
  test::TempDir logs;
  Mcirun m(args({"--standalone", "--nproc-per-node=3", "--rdzv-id=job9", "--log-dir", logs.path() + "/base", "-r",
                 "0:3,1:1", "-t", "2:3"},
                sh("printf \"out $LOCAL_RANK\\npartial\"; echo err $LOCAL_RANK >&2")),
           {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  const fs::path run = run_folder(logs.path() + "/base");
  EXPECT_EQ(run.filename().string().rfind("job9_", 0), 0u) << run;
  const fs::path attempt = run / "attempt_0";
  // The files hold what the program wrote, byte for byte.
  EXPECT_EQ(slurp(attempt / "0" / "stdout.log"), "out 0\npartial");
  EXPECT_EQ(slurp(attempt / "0" / "stderr.log"), "err 0\n");
  EXPECT_EQ(slurp(attempt / "1" / "stdout.log"), "out 1\npartial");
  EXPECT_FALSE(fs::exists(attempt / "1" / "stderr.log")) << "rank 1's stderr stays on the console";
  EXPECT_EQ(slurp(attempt / "2" / "stdout.log"), "out 2\npartial");
  EXPECT_EQ(slurp(attempt / "2" / "stderr.log"), "err 2\n");
  // The console: nothing redirected, tee'd lines with torchrun's header.
  EXPECT_EQ(sorted(lines_of(m.out())), (Strings{"[default2]:out 2", "[default2]:partial"})) << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "\nerr 1\n") || err.rfind("err 1\n", 0) == 0) << err;
  EXPECT_TRUE(contains(err, "[default2]:err 2\n")) << err;
  EXPECT_FALSE(contains(err, "err 0")) << err;
  EXPECT_TRUE(contains(err, "mcirun: the processes' logs are in " + attempt.string() + "/LOCAL_RANK/")) << err;
}

TEST(LauncherTorchrun, AFailingRanksErrorFileLivesInItsLogFolderAndIsQuoted) {
  test::TempDir logs;
  Mcirun m(args({"--standalone", "--log_dir=" + logs.path()},
                sh("printf '{\"message\": {\"message\": \"ValueError: boom\"}}' > $TORCHELASTIC_ERROR_FILE; exit 1")));
  ASSERT_EQ(m.code(), 1) << m.all();
  const fs::path file = run_folder(logs.path()) / "attempt_0" / "0" / "error.json";
  EXPECT_TRUE(fs::exists(file)) << "kept after the job, as torchrun keeps it";
  EXPECT_TRUE(
      contains(m.err(), "mcirun: rank 0 raised (from its TORCHELASTIC_ERROR_FILE):\nmcirun: | ValueError: boom"))
      << m.all();
}

TEST(LauncherTorchrun, TeeWithoutLogDirWritesToAFolderMcirunNames) {
  Mcirun m(args({"--standalone", "-t", "1"}, sh("echo hello")), {{"TMPDIR", "\x01"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "[default0]:hello\n");
  const std::string err = m.err();
  const std::string says = "mcirun: the processes' logs are in ";
  ASSERT_TRUE(contains(err, says)) << err;
  const std::string attempt =
      err.substr(err.find(says) + says.size(), err.find("/LOCAL_RANK/") - err.find(says) - says.size());
  EXPECT_EQ(attempt.rfind("/tmp/mcirun-logs-", 0), 0u) << attempt;
  EXPECT_EQ(slurp(attempt + "/0/stdout.log"), "hello\n");
  std::error_code ec;
  fs::remove_all(fs::path(attempt).parent_path().parent_path(), ec);
}

TEST(LauncherTorchrun, LocalRanksFilterHidesTheOtherRanksFromTheConsoleOnly) {
  test::TempDir logs;
  Mcirun m(args({"--standalone", "--nproc_per_node=3", "--local-ranks-filter=1", "-t", "1", "--log-dir", logs.path()},
                sh("echo out $LOCAL_RANK; echo err $LOCAL_RANK >&2")),
           {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "[default1]:out 1\n");
  EXPECT_TRUE(contains(m.err(), "err 1\n")) << m.all();
  EXPECT_FALSE(contains(m.err(), "err 0") || contains(m.err(), "err 2")) << m.all();
  const fs::path attempt = run_folder(logs.path()) / "attempt_0";
  for (int r = 0; r < 3; ++r) EXPECT_EQ(slurp(attempt / std::to_string(r) / "stdout.log"), fmt::format("out {}\n", r));
}

TEST(LauncherTorchrun, PrefixTemplateRoleAndDuplicateFilters) {
  test::TempDir logs;
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--role=trainer",
                 "--log-line-prefix-template=${rank}|${role_name}> ", "-t", "1",
                 "--duplicate-stdout-filters=loss,,x,acc", "--log-dir", logs.path()},
                sh("echo \"loss,x 0.5\"; echo \"loss 0.7\"; echo \"other\"; echo ROLE_NAME=$ROLE_NAME >&2")),
           {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(sorted(lines_of(m.out())), (Strings{"0|trainer> loss 0.7", "0|trainer> loss,x 0.5", "0|trainer> other",
                                                "1|trainer> loss 0.7", "1|trainer> loss,x 0.5", "1|trainer> other"}))
      << m.all();
  EXPECT_TRUE(contains(m.err(), "0|trainer> ROLE_NAME=trainer\n")) << m.all();
  const fs::path filtered = run_folder(logs.path()) / "attempt_0" / "filtered_stdout.log";
  EXPECT_EQ(sorted(lines_of(slurp(filtered))), (Strings{"0|trainer> loss,x 0.5", "1|trainer> loss,x 0.5"}))
      << "'loss,x' (a comma written ',,') or 'acc'";
}

TEST(LauncherTorchrun, DashMRunsAModuleUnderPython) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing";
  test::TempDir mods;
  mods.file("mcirun_probe_mod.py",
            "import os, sys\nprint(__name__, sys.argv[1:], os.environ['RANK'], os.path.basename(sys.argv[0]))\n");
  Mcirun m({"--standalone", "--nproc_per_node=2", "-m", "mcirun_probe_mod", "--lr", "1"},
           {{"MCI_PYTHON", kPython}, {"PYTHONPATH", mods.path()}, {"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(sorted(lines_of(m.out())),
            (Strings{"__main__ ['--lr', '1'] 0 mcirun_probe_mod.py", "__main__ ['--lr', '1'] 1 mcirun_probe_mod.py"}))
      << m.all();

  Mcirun missing({"--standalone", "-m", "mcirun_no_such_mod"}, {{"MCI_PYTHON", kPython}});
  ASSERT_EQ(missing.code(), 1) << missing.all();
  EXPECT_TRUE(contains(missing.err(), "No module named mcirun_no_such_mod")) << missing.all();
  EXPECT_TRUE(contains(missing.err(), "which cannot import 'mcirun_no_such_mod'")) << missing.all();
}

TEST(LauncherTorchrun, RunPathRunsAScriptOfAnyNameUnderPython) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing";
  test::TempDir d;
  const std::string script = d.file("train", "import sys\nprint('ran', sys.argv[1:])\n");  // no .py, no x bit
  Mcirun m({"--standalone", "--run-path", "--no-python", script, "a"}, {{"PYTHON_EXEC", kPython}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "ran ['a']\n");
}

TEST(LauncherTorchrun, PetTwinsActAsTheirFlagsAndTheCommandLineWins) {
  Mcirun m(sh("echo RANK=$RANK ROLE=$ROLE_NAME WORLD=$WORLD_SIZE"),
           {{"PET_NPROC_PER_NODE", "3"}, {"PET_STANDALONE", "1"}, {"PET_ROLE", "worker"}, {"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(sorted(lines_of(m.out())),
            (Strings{"RANK=0 ROLE=worker WORLD=3", "RANK=1 ROLE=worker WORLD=3", "RANK=2 ROLE=worker WORLD=3"}))
      << m.all();
  Mcirun flag(args({"--nproc_per_node=2"}, sh("echo $WORLD_SIZE")),
              {{"PET_NPROC_PER_NODE", "3"}, {"PET_STANDALONE", "1"}, {"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(flag.code(), 0) << flag.all();
  EXPECT_EQ(flag.out(), "2\n2\n");
  Mcirun bad(sh("true"), {{"PET_NNODES", "two"}});
  EXPECT_EQ(bad.code(), 2);
  EXPECT_EQ(bad.err(), "mcirun: PET_NNODES='two' is not valid: use a number of nodes, 1 or more\n");
}

class SignalsToHandle : public ::testing::TestWithParam<int> {
  DefaultSigint sigint_;
};

TEST_P(SignalsToHandle, ASignalOfTheListIsPassedOnAndStopsTheJob) {
  const int sig = GetParam();
  const std::string name = std::string(sigabbrev_np(sig));
  const std::string script = "trap 'echo got " + name + " > $TEST_DIR/got.$RANK; exit 0' " + name +
                             "; echo ready $RANK; while :; do sleep 0.05; done";
  Strings flags{"--standalone", "--nproc_per_node=2"};
  if (sig == SIGUSR1) flags.push_back("--signals-to-handle=SIGUSR1,SIGTERM");  // SIGQUIT is in torchrun's default
  Mcirun m(args(flags, sh(script)), {{"OMP_NUM_THREADS", "1"}});
  ASSERT_TRUE(eventually([&] { return contains(m.out(), "ready 0\n") && contains(m.out(), "ready 1\n"); }, 10s))
      << m.all();
  ASSERT_EQ(::kill(m.pid(), sig), 0);
  ASSERT_EQ(m.code(), 128 + sig) << m.all();
  EXPECT_TRUE(contains(m.err(), "mcirun: received SIG" + name + ": stopping the job")) << m.all();
  EXPECT_EQ(m.file("got.0"), "got " + name + "\n") << m.all();
  EXPECT_EQ(m.file("got.1"), "got " + name + "\n") << m.all();
  if (sig == SIGUSR1) {
    EXPECT_TRUE(contains(m.err(), "--signals_to_handle leaves out SIGINT, SIGHUP: mcirun still stops the job on them"))
        << m.all();
  }
}

INSTANTIATE_TEST_SUITE_P(LauncherTorchrun, SignalsToHandle, ::testing::Values(SIGUSR1, SIGQUIT),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

TEST(LauncherTorchrun, FlagsWithoutMeaningHereRunTheJobWithOneNoticeEach) {
  Mcirun m(args({"--standalone", "--start-method=fork", "--event-log-handler=console", "--logs-specs=mine",
                 "--rdzv-conf=read_timeout=5", "--monitor-interval=1", "--max-restarts=0", "--rdzv-backend=c10d"},
                sh("echo ran")));
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "ran\n");
  const Strings err = lines_of(m.err());
  ASSERT_EQ(err.size(), 4u) << m.all();
  EXPECT_TRUE(contains(err[0], "--start_method=fork has no meaning here")) << m.all();
  EXPECT_TRUE(contains(err[1], "--event_log_handler=console ignored")) << m.all();
  EXPECT_TRUE(contains(err[2], "--logs-specs=mine ignored")) << m.all();
  EXPECT_TRUE(contains(err[3], "--rdzv_conf: read_timeout ignored")) << m.all();
}

TEST(LauncherTorchrun, VirtualLocalRankAndLocalAddr) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--virtual-local-rank", "--local-addr=127.0.0.1"},
                sh("echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES ADDR=$MASTER_ADDR")),
           {{"CUDA_VISIBLE_DEVICES", "5,7"}, {"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(sorted(lines_of(m.out())),
            (Strings{"RANK=0 LOCAL_RANK=0 CVD=5 ADDR=127.0.0.1", "RANK=1 LOCAL_RANK=0 CVD=7 ADDR=127.0.0.1"}))
      << m.all();
}

TEST(LauncherTorchrun, PrintCompletionCompletesInBash) {
  Mcirun m({"--print-completion", "bash"});
  ASSERT_EQ(m.code(), 0) << m.all();
  test::TempDir d;
  const std::string file = d.file("mcirun.bash", m.out());
  Mcirun complete({"--standalone", "/bin/bash", "-c",
                   "source " + file + "; COMP_WORDS=(mcirun --nproc-p); COMP_CWORD=1; _mcirun; echo ${COMPREPLY[@]}"});
  ASSERT_EQ(complete.code(), 0) << complete.all();
  EXPECT_EQ(complete.out(), "--nproc-per-node\n");
}

}  // namespace
}  // namespace mci::test
