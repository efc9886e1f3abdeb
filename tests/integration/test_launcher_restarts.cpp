// mcirun --max-restarts, torchrun's semantics: a rank's failure on any node
// stops every process on every node and starts them all again, up to N
// times; the processes read the attempt in TORCHELASTIC_RESTART_COUNT; the
// last summary lists each attempt's failure; a stop by signal is never
// restarted; mci groups form again on the same store whatever the failed
// attempt left in it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/socket.hpp"
#include "launcher_run.hpp"
#include "mci/store.hpp"
#include "support/ports.hpp"
#include "support/rank.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

int attempt_of_this_process() {
  const char* v = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return v ? std::atoi(v) : -1;
}

// Attempt 0: rank 1 fails once the others have arrived at the group (they
// wait for it there): the store then holds their two arrivals. Attempt 1:
// everyone joins a group that must not count those.
MCI_SCENARIO(join_after_a_failed_attempt) {
  const int attempt = attempt_of_this_process();
  if (attempt == 0 && std::atoi(std::getenv("RANK")) == 1) {
    TcpStoreOptions so;
    so.host = std::getenv("MCI_STORE_ADDR");
    so.port = std::atoi(std::getenv("MCI_STORE_PORT"));
    so.token = std::getenv("MCI_JOB_TOKEN");
    TcpStore store(so);
    while (store.add("mci/default/arrivals", 0) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return 3;
  }
  auto pg = join();
  pg->barrier();
  say(fmt::format("attempt {} joined rank {} size {}", attempt, pg->rank(), pg->size()));
  return 0;
}

// Rank 1 fails in the first `fails` attempts; everyone prints its attempt.
// Rank 1 fails only once rank 0 has printed (rank 0 says so with a file,
// rank 1 waits for it for up to 10 s): otherwise mcirun may stop rank 0
// before its shell ran echo.
Strings failing_until(int fails) {
  return {"/bin/sh", "-c",
          fmt::format("echo attempt=$TORCHELASTIC_RESTART_COUNT max=$TORCHELASTIC_MAX_RESTARTS rank=$RANK;"
                      "said=$TEST_DIR/said.$TORCHELASTIC_RESTART_COUNT;"
                      "if [ $RANK = 0 ]; then touch $said; sleep 0.2; fi;"
                      "if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT -lt {} ]; then"
                      "  i=0; while [ ! -e $said ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; exit 3;"
                      "fi",
                      fails)};
}

std::set<std::string> lines_set(const std::string& text) {
  const auto l = lines_of(text);
  return {l.begin(), l.end()};
}

TEST(Restarts, AFailedRankRestartsEveryProcessUntilAnAttemptSucceeds) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--max-restarts=3"}, failing_until(2)));
  ASSERT_EQ(m.code(60s), 0) << m.all();
  std::set<std::string> expect;
  for (int a = 0; a < 3; ++a) {
    for (int r = 0; r < 2; ++r) expect.insert(fmt::format("attempt={} max=3 rank={}", a, r));
  }
  EXPECT_EQ(lines_set(m.out()), expect) << "three starts of both ranks, none after the success: " << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "mcirun: attempt 0 failed (rank 1 (pid ")) << err;
  EXPECT_TRUE(contains(err, "failed: exit code 3): restarting every process, restart 1 of 3")) << err;
  EXPECT_TRUE(contains(err, "restart 2 of 3")) << err;
  EXPECT_FALSE(contains(err, "restart 3 of 3")) << err;
  EXPECT_TRUE(contains(err, "mcirun: the job was started 3 time(s) (--max-restarts=3); the last start succeeded"))
      << err;
  EXPECT_TRUE(contains(err, "mcirun:   attempt 1 failed: rank 1 (pid ")) << err;
}

TEST(Restarts, TheJobFailsOnceTheRestartsAreSpentAndListsEachAttempt) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--max_restarts=2"}, failing_until(100)));
  ASSERT_EQ(m.code(60s), 1) << m.all();
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "mcirun: the job was started 3 time(s) (--max-restarts=2)\n")) << err;
  for (int a = 0; a < 3; ++a) {
    EXPECT_TRUE(contains(err, fmt::format("mcirun:   attempt {} failed: rank 1 (pid ", a))) << err;
  }
  EXPECT_FALSE(contains(m.out(), "attempt=3")) << m.all();
  EXPECT_TRUE(contains(err, "job failed: rank 1")) << "the last attempt's full summary: " << err;
}

TEST(Restarts, WithoutTheFlagAFailureEndsTheJob) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2"}, failing_until(1)));
  ASSERT_EQ(m.code(), 1) << m.all();
  EXPECT_FALSE(contains(m.out(), "attempt=1")) << m.all();
  EXPECT_TRUE(contains(m.out(), "attempt=0 max=0 rank=1")) << m.all();
  EXPECT_FALSE(contains(m.err(), "restart")) << m.all();
}

TEST(Restarts, AStopBySignalIsNotRestarted) {
  DefaultSigint dfl;
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--max-restarts=5"},
                {"/bin/sh", "-c", "touch $TEST_DIR/up.$RANK; exec sleep 30"}));
  ASSERT_TRUE(eventually([&] { return m.has_file("up.0") && m.has_file("up.1"); })) << m.all();
  ::kill(m.pid(), SIGTERM);
  EXPECT_EQ(m.code(), 128 + SIGTERM) << m.all();
  EXPECT_FALSE(contains(m.err(), "restarting")) << m.all();
}

TEST(Restarts, EachAttemptHasItsLogFolder) {
  char tmpl[] = "/tmp/mcirun-restart-logs-XXXXXX";
  const std::string logs = ::mkdtemp(tmpl);
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--max-restarts=1", "--log-dir=" + logs, "-r", "1"},
                failing_until(1)));
  ASSERT_EQ(m.code(60s), 0) << m.all();
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(logs), {});
  ASSERT_EQ(runs.size(), 1u) << m.all();
  for (int a = 0; a < 2; ++a) {
    const auto log = runs[0] / fmt::format("attempt_{}", a) / "1" / "stdout.log";
    EXPECT_EQ(slurp(log.string()), fmt::format("attempt={} max=1 rank=1\n", a)) << log;
  }
  std::filesystem::remove_all(logs);
}

TEST(Restarts, AGroupFormsAgainOnTheSameStoreAfterAFailedAttempt) {
  Mcirun m({"--standalone", "--nproc_per_node=3", "--max-restarts=1", self_program(),
            "--scenario=join_after_a_failed_attempt"},
           {{"MCI_TEST_TIMEOUT_MS", "20000"}});
  ASSERT_EQ(m.code(90s), 0) << m.all();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(contains(m.out(), fmt::format("attempt 1 joined rank {} size 3", r))) << m.all();
  }
}

// Two launchers on this host, one per node: a failure on node 1 restarts
// node 0's processes too, and both nodes start the next attempt together.
TEST(Restarts, AFailureOnOneNodeRestartsEveryNode) {
  const int port = free_port();
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "restart-token"}, {"OMP_NUM_THREADS", "1"}};
  auto node = [&](int n) {
    return args({"--nnodes=2", fmt::format("--node_rank={}", n), "--nproc_per_node=2", "--master_addr=127.0.0.1",
                 fmt::format("--master_port={}", port), "--max-restarts=2"},
                {"/bin/sh", "-c",
                 "echo attempt=$TORCHELASTIC_RESTART_COUNT rank=$RANK;"
                 "if [ $RANK = 3 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 3; fi;"
                 "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 30; fi"});
  };
  Mcirun n0(node(0), env);
  Mcirun n1(node(1), env);
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n1.code(60s), 0) << n0.all() << n1.all();
  const std::string out = n0.out() + n1.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("attempt=1 rank={}\n", r))) << n0.all() << n1.all();
  }
  EXPECT_FALSE(contains(out, "attempt=2")) << n0.all() << n1.all();
  EXPECT_TRUE(contains(n0.err(), "another node failed")) << n0.all();
  EXPECT_TRUE(contains(n0.err(), "restarting every process, restart 1 of 2")) << n0.all();
  EXPECT_TRUE(contains(n1.err(), "restarting every process, restart 1 of 2")) << n1.all();
}

}  // namespace
}  // namespace mci::test
