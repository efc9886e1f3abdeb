// "Publish mine, read everyone's, fail together" over a real store, with
// threads as ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/all_ranks.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

struct Ranks {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
  // Runs body(store, rank) on n threads; returns each rank's error text.
  std::vector<std::string> run(int n, const std::function<void(Store&, int)>& body) {
    return test::run_threads(n, [&](int r) {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore s(o);
      body(s, r);
    });
  }
};

TEST(AllRanks, EveryRankReadsEveryValue) {
  Ranks job;
  std::vector<std::vector<std::string>> seen(3);
  auto errors = job.run(3, [&](Store& s, int r) {
    seen[static_cast<std::size_t>(r)] =
        run_together(s, "t", r, 3, Deadline(5000ms), "say hello", [&] { return "v" + std::to_string(r); });
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    EXPECT_EQ(seen[static_cast<std::size_t>(r)], (std::vector<std::string>{"v0", "v1", "v2"}));
  }
}

TEST(AllRanks, OneRanksFailureStopsEveryRankAtOnceWithItsText) {
  Ranks job;
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = job.run(3, [&](Store& s, int r) {
    run_together(s, "t", r, 3, Deadline(30000ms), "open its GPU", [&]() -> std::string {
      if (r == 1) throw ConfigError("no GPU here");
      return "ok";
    });
  });
  // Well before the 30 s deadline: nobody waited for rank 1.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_EQ(errors[1], "no GPU here");
  EXPECT_EQ(errors[0], "rank 1 could not open its GPU, so rank 0 stops too: no GPU here");
  EXPECT_EQ(errors[2], "rank 1 could not open its GPU, so rank 2 stops too: no GPU here");
}

TEST(AllRanks, VerdictsStopAtTheFirstFailureWithoutThrowing) {
  Ranks job;
  std::vector<RankVerdicts> got(3);
  auto errors = job.run(3, [&](Store& s, int r) {
    const Verdict v = r == 0 ? Verdict::value("fine") : Verdict::error("broken " + std::to_string(r));
    got[static_cast<std::size_t>(r)] = exchange_verdicts(s, "v", r, 3, v, Deadline(5000ms));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    EXPECT_EQ(got[static_cast<std::size_t>(r)].failures(), "rank 1: broken 1");
    EXPECT_EQ(got[static_cast<std::size_t>(r)].first_failed(), 1);
  }
}

// A rank that believes the world is larger than it is stops at the first
// failure instead of waiting for ranks that will never come.
TEST(AllRanks, AFailureBeforeAMissingRankEndsTheWaitAtOnce) {
  Ranks job;
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = job.run(2, [&](Store& s, int r) {
    run_together(s, "t", r, r == 1 ? 3 : 2, Deadline(30000ms), "agree on the world size", [&]() -> std::string {
      if (r == 0) throw ConfigError("WORLD_SIZE differs");
      return "ok";
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_EQ(errors[0], "WORLD_SIZE differs");
  EXPECT_EQ(errors[1], "rank 0 could not agree on the world size, so rank 1 stops too: WORLD_SIZE differs");
}

TEST(AllRanks, AMissingRankIsATimeoutNamingItsKey) {
  Ranks job;
  auto errors = job.run(1, [&](Store& s, int r) {
    run_together(s, "t", r, 2, Deadline(300ms), "join", [] { return std::string("ok"); });
  });
  EXPECT_NE(errors[0].find("t/1"), std::string::npos) << errors[0];
}

// A rank whose process ends before it publishes (its death certificate:
// the store appends ";lost R" to the topic's failure key when its
// connection closes) stops every other rank's read at once, and all name it
// as the first failure, with the ranks below it read in full.
TEST(AllRanks, ARankThatEndsBeforePublishingStopsTheExchangeAtOnce) {
  Ranks job;
  std::vector<RankVerdicts> got(4);
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = job.run(4, [&](Store& s, int r) {
    ASSERT_TRUE(s.append_on_close("v/failed", to_bytes(";lost " + std::to_string(r))));
    if (r == 2) return;  // its connection closes here, with nothing published
    got[static_cast<std::size_t>(r)] =
        exchange_verdicts(s, "v", r, 4, Verdict::value("at " + std::to_string(r)), Deadline(30000ms));
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // nobody waited out the 30 s
  for (int r : {0, 1, 3}) {
    const RankVerdicts& v = got[static_cast<std::size_t>(r)];
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    ASSERT_EQ(v.first_failed(), 2) << v.failures();
    EXPECT_EQ(v.of_rank[0].text, "at 0");
    EXPECT_EQ(v.of_rank[1].text, "at 1");
    EXPECT_NE(v.of_rank[2].text.find("its process ended"), std::string::npos) << v.of_rank[2].text;
  }
}

// A rank that published and then ended is no failure: its value counts,
// for a rank already waiting (stopped by the certificate, it reads on) and
// for one that comes after.
TEST(AllRanks, ARankThatEndsAfterPublishingStillCounts) {
  Ranks job;
  std::vector<RankVerdicts> got(3);
  std::atomic<bool> ended{false};
  auto errors = job.run(3, [&](Store& s, int r) {
    ASSERT_TRUE(s.append_on_close("v/failed", to_bytes(";lost " + std::to_string(r))));
    if (r == 0) {
      try {
        (void)exchange_verdicts(s, "v", 0, 3, Verdict::value("at 0"), Deadline(50ms));
      } catch (const TimeoutError&) {
        // published, then gave up waiting for rank 2, which comes later
      }
      ended = true;
      return;
    }
    while (r == 2 && !ended.load()) std::this_thread::sleep_for(1ms);
    got[static_cast<std::size_t>(r)] =
        exchange_verdicts(s, "v", r, 3, Verdict::value("at " + std::to_string(r)), Deadline(30000ms));
  });
  for (int r : {1, 2}) {
    const RankVerdicts& v = got[static_cast<std::size_t>(r)];
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    EXPECT_EQ(v.first_failed(), -1) << v.failures();
    ASSERT_EQ(v.of_rank.size(), 3U);
    EXPECT_EQ(v.of_rank[0].text, "at 0");
  }
}

TEST(AllRanks, LostRanksAreReadFromTheFailureKeysRecords) {
  EXPECT_EQ(lost_ranks(""), std::set<int>{});
  EXPECT_EQ(lost_ranks("1"), std::set<int>{});
  EXPECT_EQ(lost_ranks("1;lost 3;timeout 4;lost 12"), (std::set<int>{3, 12}));
  EXPECT_EQ(lost_ranks(";lost x;lost 5"), std::set<int>{5});
}

// agree(): the same decisions with O(1) store traffic per rank.

TEST(AllRanks, AgreeIsOkOnceEveryRankIsOk) {
  Ranks job;
  std::vector<GroupVerdict> got(4);
  auto errors = job.run(4, [&](Store& s, int r) {
    got[static_cast<std::size_t>(r)] = agree(s, "a", r, 4, Verdict::value(""), Deadline(5000ms));
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    EXPECT_TRUE(got[static_cast<std::size_t>(r)].ok()) << got[static_cast<std::size_t>(r)].failure;
  }
}

TEST(AllRanks, AgreeGivesEveryRankTheSameFirstFailure) {
  Ranks job;
  std::vector<GroupVerdict> got(4);
  auto errors = job.run(4, [&](Store& s, int r) {
    const Verdict v = r % 2 ? Verdict::error("broken " + std::to_string(r)) : Verdict::value("");
    got[static_cast<std::size_t>(r)] = agree(s, "a", r, 4, v, Deadline(5000ms));
  });
  const int first = got[0].failed_rank;
  EXPECT_TRUE(first == 1 || first == 3) << first;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    EXPECT_EQ(got[static_cast<std::size_t>(r)].failed_rank, first);
    EXPECT_EQ(got[static_cast<std::size_t>(r)].failure, "broken " + std::to_string(first));
  }
}

TEST(AllRanks, AgreeTogetherStopsEveryRankAtOnceWithTheFailingRanksText) {
  Ranks job;
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = job.run(3, [&](Store& s, int r) {
    agree_together(s, "t", r, 4, Deadline(30000ms), "map its memory", [&] {
      if (r == 2) throw ConfigError("no /dev/shm");
    });
  });
  // Rank 3 never comes: nobody waits for it once rank 2 failed.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_EQ(errors[2], "no /dev/shm");
  EXPECT_EQ(errors[0], "rank 2 could not map its memory, so rank 0 stops too: no /dev/shm");
  EXPECT_EQ(errors[1], "rank 2 could not map its memory, so rank 1 stops too: no /dev/shm");
}

// Rank 0 gives up first and names who never came; rank 2, still within its
// own (longer) budget, reads that rank 0 gave up. With equal budgets either
// rank may be first, and the second reads the first's timeout rather than
// timing out itself (CI once saw exactly that), so the budgets differ here.
TEST(AllRanks, AgreeTimesOutNamingTheRanksThatNeverCame) {
  Ranks job;
  GroupVerdict of_rank_2;
  auto errors = job.run(2, [&](Store& s, int r) {
    if (r == 0) {
      (void)s.get("a/2", 30000ms);  // rank 2 has published, however late its thread started
      agree(s, "a", 0, 4, Verdict::value(""), Deadline(300ms));
    } else {
      of_rank_2 = agree(s, "a", 2, 4, Verdict::value(""), Deadline(30000ms));
    }
  });
  EXPECT_NE(errors[0].find("Timed out waiting 300ms for rank(s) 1, 3 to publish 'a' (2 of 4 ranks did)"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(of_rank_2.failed_rank, 0);
  EXPECT_TRUE(of_rank_2.gave_up);
  EXPECT_NE(of_rank_2.failure.find("it timed out waiting for the others"), std::string::npos) << of_rank_2.failure;
}

// A rank that arrives after another gave up on the agreement must not
// complete it alone (its arrival made the count reach the size): it reads
// that the other timed out. Init's last step is such an agreement; a rank
// stopped past the timeout used to find the group made, alone.
TEST(AllRanks, ARankArrivingAfterAnotherTimedOutDoesNotCompleteTheAgreement) {
  Ranks job;
  std::atomic<bool> gave_up{false};
  GroupVerdict late;
  auto errors = job.run(2, [&](Store& s, int r) {
    if (r == 0) {
      try {
        agree(s, "a", 0, 2, Verdict::value(""), Deadline(100ms));
      } catch (const TimeoutError&) {
        gave_up = true;
        throw;
      }
      return;
    }
    while (!gave_up.load()) std::this_thread::sleep_for(1ms);
    late = agree(s, "a", 1, 2, Verdict::value(""), Deadline(5000ms));
  });
  EXPECT_NE(errors[0].find("Timed out waiting 100ms for rank(s) 1 to publish 'a'"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_FALSE(late.ok());
  EXPECT_EQ(late.failed_rank, 0);
  EXPECT_NE(late.failure.find("it timed out waiting for the others"), std::string::npos) << late.failure;
}

// What a shrink needs to try again without waiting a second timeout: the
// rank that timed out learns who was silent, and a rank that read its
// timeout gets a TimeoutError (not a ConfigError) saying so.
TEST(AllRanks, ATimedOutAgreementNamesTheSilentRanksAndTellsTheOthersItTimedOut) {
  Ranks job;
  std::vector<int> silent;
  std::atomic<bool> gave_up{false};
  std::string late_error;
  bool late_was_timeout = false;
  auto errors = job.run(2, [&](Store& s, int r) {
    if (r == 0) {
      try {
        agree_together(s, "t", 0, 4, Deadline(100ms), "join the group", [] {});
      } catch (const AgreementTimedOut& e) {
        silent = e.silent();
        gave_up = true;
        throw;
      }
      return;
    }
    while (!gave_up.load()) std::this_thread::sleep_for(1ms);
    try {
      agree_together(s, "t", 2, 4, Deadline(5000ms), "join the group", [] {});
    } catch (const TimeoutError& e) {
      late_was_timeout = dynamic_cast<const AgreementTimedOut*>(&e) != nullptr;
      late_error = e.what();
    }
  });
  EXPECT_EQ(silent, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(late_was_timeout) << late_error;
  EXPECT_NE(late_error.find("rank 0 could not join the group, so rank 2 stops too: it timed out waiting"),
            std::string::npos)
      << late_error;
}

}  // namespace
}  // namespace mci
