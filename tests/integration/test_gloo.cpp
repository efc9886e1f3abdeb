// The gloo backend (the real Gloo library) in real processes over real
// sockets: every collective and dtype against the reference, async work,
// point-to-point tags, and how timeouts, dead peers and mismatched calls
// surface. Skipped when this build has no Gloo.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "../support/job.hpp"
#include "mci/init.hpp"

namespace mci::test {
namespace {

#define MCI_REQUIRE_GLOO()                                                        \
  if (!mci::backend_available("gloo")) {                                          \
    GTEST_SKIP() << "this build has no gloo backend (libgloo-dev was not found)"; \
  }

std::map<std::string, std::string> gloo_env(std::map<std::string, std::string> extra = {}) {
  extra.emplace("MCI_TEST_BACKEND", "gloo");
  return extra;
}

// Milliseconds a worker printed after `key` ("noticed_ms 42"), or -1.
long long printed_ms(const std::string& out, const std::string& key) {
  const auto at = out.find(key + " ");
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + key.size() + 1));
}

class GlooMatrix : public ::testing::TestWithParam<int> {};

TEST_P(GlooMatrix, EveryCollectiveEveryDtypeMatchesReference) {
  MCI_REQUIRE_GLOO();
  const int world = GetParam();
  Job job(world, Scenario{"matrix"}, gloo_env());
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < world; ++r) {
    const auto st = job.status(r);
    EXPECT_TRUE(st.exited && st.code == 0) << "rank " << r << " code " << st.code << " sig " << st.sig << "\n"
                                           << job.all_output();
    EXPECT_NE(job.output(r).find("matrix done: 0 failures"), std::string::npos) << job.output(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooMatrix, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(GlooAsync, CallsOverlapComputeAndCompleteInOrder) {
  MCI_REQUIRE_GLOO();
  for (int world : {2, 3}) {
    Job job(world, Scenario{"async"}, gloo_env());
    job.wait(std::chrono::seconds(60));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("async ok"), std::string::npos) << job.output(r);
    }
  }
}

// Gloo sends by rendezvous; the backend's sends complete when posted, so a
// receiver may take tags in any order without deadlocking the sender.
TEST(GlooPointToPoint, ReceivesMatchSendsByTagNotArrivalOrder) {
  MCI_REQUIRE_GLOO();
  Job job(3, Scenario{"p2p_tags"}, gloo_env({{"MCI_TEST_TIMEOUT_MS", "20000"}}));
  job.wait(std::chrono::seconds(30));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(job.status(r).code, 0) << job.all_output();
    EXPECT_NE(job.output(r).find("p2p ok"), std::string::npos) << job.output(r);
  }
}

// Async recv then send between the same two ranks (and around a ring of
// 3): Gloo's receive is posted at once and waited for once the send is
// posted too, not run before the send is even posted.
TEST(GlooPointToPoint, AsyncRecvPostedBeforeItsSendCompletes) {
  MCI_REQUIRE_GLOO();
  for (int world : {2, 3}) {
    Job job(world, Scenario{"p2p_recv_first"}, gloo_env({{"MCI_TEST_TIMEOUT_MS", "10000"}}));
    job.wait(std::chrono::seconds(60));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, 0) << job.all_output();
      EXPECT_NE(job.output(r).find("recv first ok"), std::string::npos) << job.output(r);
    }
  }
}

TEST(GlooTimeout, RankThatNeverArrivesGivesTimeoutError) {
  MCI_REQUIRE_GLOO();
  Job job(2, Scenario{"timeout"}, gloo_env({{"MCI_TEST_TIMEOUT_MS", "1500"}, {"MCI_TEST_SLEEP_MS", "6000"}}));
  job.wait(std::chrono::seconds(60));
  const std::string out = job.output(0);
  EXPECT_EQ(job.status(0).code, exit_code::timeout) << job.all_output();
  EXPECT_NE(out.find("Timed out waiting 1500ms"), std::string::npos) << out;
  EXPECT_NE(out.find("all_reduce #1 (f32 x 2, sum)"), std::string::npos) << out;
  EXPECT_NE(out.find("on rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("peer rank 1"), std::string::npos) << out;
  // Gloo's own words stay in the message.
  EXPECT_NE(out.find("for recv operation to complete"), std::string::npos) << out;
  const long long waited = printed_ms(out, "waited_ms");
  EXPECT_GE(waited, 1400) << out;
  EXPECT_LT(waited, 5000) << out;
  // The rank that skipped finds its peer gone and still closes cleanly.
  EXPECT_EQ(job.status(1).code, 0) << job.all_output();
}

// Gloo hears of a dead peer from its socket (reset or end-of-file) and the
// backend names the rank from the address in Gloo's message.
TEST(GlooPeerDeath, SurvivorsGetPeerErrorNamingTheDeadRankLongBeforeTheTimeout) {
  MCI_REQUIRE_GLOO();
  for (int world : {2, 3}) {
    Job job(world, Scenario{"peer_death"}, gloo_env({{"MCI_TEST_TIMEOUT_MS", "60000"}}));
    job.wait(std::chrono::seconds(50));
    EXPECT_EQ(job.status(world - 1).code, 9) << job.all_output();
    for (int r = 0; r < world - 1; ++r) {
      const std::string out = job.output(r);
      EXPECT_FALSE(job.status(r).timed_out) << job.all_output();
      EXPECT_EQ(job.status(r).code, exit_code::peer) << job.all_output();
      EXPECT_NE(out.find("exited, crashed or aborted"), std::string::npos) << out;
      // Named: the dead rank itself, or the survivor that relayed its death
      // (whose reason, quoted, names the dead rank).
      EXPECT_EQ(out.find("PeerError(peer -1)"), std::string::npos) << out;
      EXPECT_NE(out.find("rank " + std::to_string(world - 1) + " exited"), std::string::npos) << out;
      const long long noticed = printed_ms(out, "noticed_ms");
      EXPECT_GE(noticed, 0) << out;
      EXPECT_LT(noticed, 10000) << out;
    }
  }
}

// Gloo carries no fingerprint; the backend hashes it into the slot so ranks
// that disagree never exchange data. They wait for the timeout; the hang
// report then sees the other rank in a different collective at the same
// position, and the group raises MismatchError with the report.
TEST(GlooMismatch, DifferentCollectivesAreAMismatchFoundAtTheTimeout) {
  MCI_REQUIRE_GLOO();
  Job job(2, Scenario{"mismatch"}, gloo_env({{"MCI_TEST_TIMEOUT_MS", "1500"}}));
  job.wait(std::chrono::seconds(30));
  const auto a = job.status(0), b = job.status(1);
  EXPECT_FALSE(a.timed_out || b.timed_out) << job.all_output();
  // One rank finds the mismatch; the other finds it too or hears that it aborted.
  EXPECT_TRUE(a.code == exit_code::mismatch || b.code == exit_code::mismatch) << job.all_output();
  EXPECT_TRUE((a.code == exit_code::mismatch || a.code == exit_code::peer) &&
              (b.code == exit_code::mismatch || b.code == exit_code::peer))
      << job.all_output();
  EXPECT_NE(job.all_output().find("MismatchError: collective mismatch: rank "), std::string::npos) << job.all_output();
  EXPECT_NE(job.all_output().find("found when the 1500ms timeout expired: the gloo backend cannot compare the ranks' "
                                  "calls sooner"),
            std::string::npos)
      << job.all_output();
  EXPECT_NE(job.all_output().find("all_reduce #1"), std::string::npos) << job.all_output();
  EXPECT_NE(job.all_output().find("broadcast #1"), std::string::npos) << job.all_output();
  // The hang report that saw it comes with it.
  EXPECT_NE(job.all_output().find("at the same position"), std::string::npos) << job.all_output();
  EXPECT_NE(job.all_output().find("A mismatch, not a hang"), std::string::npos) << job.all_output();
}

}  // namespace
}  // namespace mci::test
