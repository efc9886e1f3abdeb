// Bounded waits and failures: a rank that never arrives, a rank that dies
// mid-collective, ranks that call different collectives.
#include <gtest/gtest.h>
#include <csignal>

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "../support/job.hpp"
#include "../support/ports.hpp"
#include "../support/rank.hpp"
#include "../support/temp_dir.hpp"

namespace mci::test {
namespace {

// Rank 1 never enters the all-reduce; rank 0 must time out and say so.
MCI_SCENARIO(timeout) {
  auto pg = join();
  std::vector<float> v{1, 2};
  if (pg->rank() == 1) {
    say("rank 1 skips");
    std::this_thread::sleep_for(std::chrono::milliseconds(env_ll("MCI_TEST_SLEEP_MS", 3000)));
    return 0;
  }
  say_ms_if_it_fails("waited_ms", [&] { pg->all_reduce(mci::view(v)); });
  return 1;
}

// Rank 1 is slow (sleeps before each all-reduce) but well within the
// timeout: a slow step, which MCI_DEBUG=timing attributes to rank 1.
MCI_SCENARIO(slow) {
  auto pg = join();
  std::vector<float> v{1, 2};
  pg->barrier();
  for (int step = 0; step < 3; ++step) {
    if (pg->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(env_ll("MCI_TEST_SLEEP_MS", 400)));
    pg->all_reduce(mci::view(v));
  }
  say("slow steps done");
  return 0;
}

// Rank 1 stops itself (SIGSTOP) before the all-reduce: a frozen rank is a
// hang (timeout + report), not a crash.
MCI_SCENARIO(stopped) {
  auto pg = join();
  std::vector<float> v{1, 2};
  pg->barrier();
  if (pg->rank() == 1) {
    say("rank 1 stops");
    ::kill(::getpid(), SIGSTOP);
    return 0;
  }
  pg->all_reduce(mci::view(v));
  return 1;
}

// Init and leave: rank 0 (which hosts the store here) exits the moment
// init returns.
MCI_SCENARIO(init_and_exit) {
  auto pg = join();
  say(fmt::format("rank {} joined", pg->rank()));
  return 0;
}

// Outside a launcher rank 0 hosts the store, and a program may exit as
// soon as init returns: every other rank's init must have completed too
// (it used to fail with "lost the connection to the store", 10 jobs of 10).
TEST(Init, CompletesOnEveryRankWhenRank0ExitsAtOnce) {
  for (int round = 0; round < 10; ++round) {
    const int port = free_port();
    Spawner ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.spawn(scenario_command("init_and_exit"), {{"RANK", std::to_string(r)},
                                                      {"WORLD_SIZE", "3"},
                                                      {"LOCAL_RANK", std::to_string(r)},
                                                      {"LOCAL_WORLD_SIZE", "3"},
                                                      {"MASTER_ADDR", "127.0.0.1"},
                                                      {"MASTER_PORT", std::to_string(port)},
                                                      {"MCI_STORE_HOSTED", "\x01"},
                                                      {"MCI_JOB_TOKEN", "init-and-exit"},
                                                      {"MCI_TEST_TIMEOUT_MS", "20000"}});
    }
    ranks.wait_all(std::chrono::seconds(60));
    for (int r = 0; r < 3; ++r) {
      const ExitStatus st = ranks.child(r).status.value();
      ASSERT_TRUE(st.exited && st.code == 0) << "round " << round << ", rank " << r << ":\n" << ranks.child(r).output();
    }
  }
}

// The last rank dies in the middle of a large all-reduce.
MCI_SCENARIO(peer_death) {
  auto pg = join();
  const std::size_t n = env_ll("MCI_TEST_COUNT", 16 << 20);
  std::vector<float> v(n, 1.0f);
  if (pg->rank() == pg->size() - 1) {
    pg->barrier();
    // Dies right after handing its all_reduce to the progress thread: the
    // operation (64 MiB by default, several ms of memory traffic at best)
    // cannot have finished, so the others are inside it, waiting for this
    // rank's data, whether it got to post some of it or not — or still in
    // the barrier, which this rank may leave before they do.
    auto w = pg->all_reduce(mci::view(v), mci::ReduceOp::sum, Exec::async);
    say(fmt::format("dying now (pid {})", ::getpid()));
    // SIGKILL, as `kill -9` from outside would: no destructor, no goodbye.
    if (std::getenv("MCI_TEST_SIGKILL")) ::kill(::getpid(), SIGKILL);
    std::_Exit(9);
  }
  say_ms_if_it_fails("noticed_ms", [&] {
    pg->barrier();
    pg->all_reduce(mci::view(v));
  });
  return 1;
}

// Rank 0 calls all_reduce while the others call broadcast.
MCI_SCENARIO(mismatch) {
  auto pg = join();
  std::vector<float> v(8, 1.0f);
  if (pg->rank() == 0) {
    pg->all_reduce(mci::view(v));
  } else {
    pg->broadcast(mci::view(v), 0);
  }
  return 1;
}

TEST(Timeout, RankThatNeverArrivesGivesTimeoutErrorNamingIt) {
  Job job(2, Scenario{"timeout"}, {{"MCI_TEST_TIMEOUT_MS", "1500"}, {"MCI_TEST_SLEEP_MS", "6000"}});
  job.wait(std::chrono::seconds(60));
  const std::string out = job.output(0);
  EXPECT_EQ(job.status(0).code, exit_code::timeout) << job.all_output();
  EXPECT_NE(out.find("Timed out waiting 1500ms"), std::string::npos) << out;
  EXPECT_NE(out.find("all_reduce #1"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1"), std::string::npos) << out;
  EXPECT_EQ(job.status(1).code, 0) << job.all_output();
  // The hang report: who never arrived and what it was doing instead.
  EXPECT_NE(out.find("mci hang report for all_reduce #1"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1: never entered all_reduce #1 (f32 x 2, sum); alive, outside mci (in user code)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("last completed: none"), std::string::npos) << out;
  EXPECT_NE(out.find("Ranks that never entered all_reduce #1 (f32 x 2, sum): 1."), std::string::npos) << out;
}

TEST(Timeout, StoppedRankIsReportedAsFrozenNotDead) {
  Job job(3, Scenario{"stopped"}, {{"MCI_TEST_TIMEOUT_MS", "1500"}, {"MCI_HANG_REPORT_WAIT_MS", "1000"}});
  job.wait_rank(0, std::chrono::seconds(30));
  job.wait_rank(2, std::chrono::seconds(30));
  const std::string out = job.output(0) + job.output(2);
  // Whichever of ranks 0 and 2 times out first aborts the group with its
  // timeout as the reason; the other fails on its own timeout or on that.
  const int c0 = job.status(0).code, c2 = job.status(2).code;
  EXPECT_TRUE(c0 == exit_code::timeout || c2 == exit_code::timeout) << job.all_output();
  for (int r : {0, 2}) {
    EXPECT_TRUE(job.status(r).code == exit_code::timeout || job.status(r).code == exit_code::peer) << job.all_output();
    EXPECT_NE(job.output(r).find("Timed out waiting 1500ms"), std::string::npos) << job.output(r);
  }
  // Stopped, it cannot answer: the report says so without waiting for it.
  EXPECT_NE(out.find("rank 1: cannot answer: process " + std::to_string(job.pid(1)) + " is stopped"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Ranks that did not answer: 1"), std::string::npos) << out;
}

TEST(SlowStep, TheLateRankIsNamedAsSlowNotHung) {
  Job job(3, Scenario{"slow"},
          {{"MCI_DEBUG", "timing"}, {"MCI_TEST_TIMEOUT_MS", "20000"}, {"MCI_TEST_SLEEP_MS", "400"}});
  job.wait(std::chrono::seconds(60));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(job.status(r).code, 0) << job.all_output();
    const std::string out = job.output(r);
    EXPECT_EQ(out.find("Timed out"), std::string::npos) << out;
    // Rank 1 heads the straggler list: last in the three all-reduces (and
    // maybe in the barrier before them).
    EXPECT_TRUE(out.find("last to arrive: rank 1 arrived last 3 times") != std::string::npos ||
                out.find("last to arrive: rank 1 arrived last 4 times") != std::string::npos)
        << out;
  }
  // Rank 0's per-collective lines: rank 1 came at least the sleep later.
  const std::string out = job.output(0);
  std::size_t pos = 0, lines = 0;
  while ((pos = out.find("all_reduce #", pos)) != std::string::npos) {
    const auto eol = out.find('\n', pos);
    const std::string line = out.substr(pos, eol - pos);
    pos = eol;
    const auto k = line.find("last to arrive: rank 1, ");
    ASSERT_NE(k, std::string::npos) << line;
    const double late_ms = std::stod(line.substr(k + 24));
    EXPECT_GE(late_ms, 350.0) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 3u) << out;
}

class PeerDeath : public ::testing::TestWithParam<std::string> {};

// "hosts": ranks pretend to be on two hosts, so all-reduce is hierarchical
// (the dying rank shares its host with a leader).
INSTANTIATE_TEST_SUITE_P(Transports, PeerDeath, ::testing::Values("shm", "tcp", "hosts"));

TEST_P(PeerDeath, SurvivorsGetPeerErrorLongBeforeTheTimeoutAndNothingIsLeftInDevShm) {
  for (int world : {2, 3}) {
    std::map<std::string, std::string> env{{"MCI_TEST_TIMEOUT_MS", "60000"}, {"MCI_TEST_SIGKILL", "1"}};
    if (GetParam() == "hosts") {
      env["MCI_TEST_HOSTS"] = world == 2 ? "a,a" : "a,b,b";
    } else {
      env["MCI_TRANSPORT"] = GetParam();
    }
    Job job(world, Scenario{"peer_death"}, env);
    job.wait(std::chrono::seconds(50));
    EXPECT_EQ(job.status(world - 1).sig, SIGKILL) << job.all_output();
    for (int r = 0; r < world - 1; ++r) {
      const std::string out = job.output(r);
      EXPECT_EQ(job.status(r).code, exit_code::peer) << job.all_output();
      EXPECT_FALSE(job.status(r).timed_out);
      // Naming the dead rank directly, or the rank that relayed its death.
      EXPECT_NE(out.find("rank " + std::to_string(world - 1)), std::string::npos) << out;
      // Long before the 60 s timeout (the issue asks for 2 s; 5 s leaves
      // room for a loaded CI machine).
      const auto at = out.find("noticed_ms ");
      ASSERT_NE(at, std::string::npos) << out;
      EXPECT_LT(std::stol(out.substr(at + 11)), 5000) << out;
    }
    // Only this job's segments: tests running beside it hold their own
    // (CI once saw another test's appear here).
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) pids.push_back(job.pid(r));
    EXPECT_EQ(mci_shm_segments_of(pids), std::vector<std::string>{}) << "left in /dev/shm";
  }
}

TEST(Mismatch, DifferentCollectivesAtTheSameSequenceNumberAreCaught) {
  Job job(2, Scenario{"mismatch"}, {{"MCI_TEST_TIMEOUT_MS", "30000"}});
  job.wait(std::chrono::seconds(25));
  int mismatches = 0;
  for (int r = 0; r < 2; ++r) {
    const auto st = job.status(r);
    EXPECT_FALSE(st.timed_out) << job.all_output();
    EXPECT_TRUE(st.code == exit_code::mismatch || st.code == exit_code::peer) << job.all_output();
    if (st.code == exit_code::mismatch) {
      ++mismatches;
      const std::string out = job.output(r);
      EXPECT_NE(out.find("all_reduce #1"), std::string::npos) << out;
      EXPECT_NE(out.find("broadcast #1"), std::string::npos) << out;
    }
  }
  EXPECT_GE(mismatches, 1) << job.all_output();
}

// Three ranks, rank 0 the odd one out (the reference a comparison with the
// first rank, or with one's own call, would take as right). The engine sees
// the mismatch on the wire at once; every rank that saw it asks the others
// what they called, so each error names rank 0, and every rank writes its
// flight recorder where MCI_FR_DUMP_DIR says, as after a timeout (the
// documented flow found an empty folder).
TEST(Mismatch, EveryRankNamesTheOddOneOutAndWritesItsFlightRecorder) {
  TempDir dumps;
  Job job(3, Scenario{"mismatch"}, {{"MCI_TEST_TIMEOUT_MS", "30000"}, {"MCI_FR_DUMP_DIR", dumps.path()}});
  job.wait(std::chrono::seconds(25));
  int mismatches = 0;
  for (int r = 0; r < 3; ++r) {
    const auto st = job.status(r);
    EXPECT_FALSE(st.timed_out) << job.all_output();
    EXPECT_TRUE(st.code == exit_code::mismatch || st.code == exit_code::peer) << job.all_output();
    if (st.code != exit_code::mismatch) continue;
    ++mismatches;
    const std::string out = job.output(r);
    EXPECT_NE(out.find("the odd one out: rank 0,"), std::string::npos) << out;
    EXPECT_NE(out.find("mci mismatch report for"), std::string::npos) << out;
    EXPECT_NE(out.find("The odd one(s) out: rank(s) 0 (2 ranks called broadcast #1"), std::string::npos) << out;
    EXPECT_NE(out.find("Flight recorder written in torch's format to " + dumps.path() + "/mci_trace_rank_" +
                       std::to_string(r)),
              std::string::npos)
        << out;
    EXPECT_TRUE(std::filesystem::exists(dumps.path() + "/mci_trace_rank_" + std::to_string(r))) << out;
  }
  EXPECT_GE(mismatches, 2) << job.all_output();
}

}  // namespace
}  // namespace mci::test
