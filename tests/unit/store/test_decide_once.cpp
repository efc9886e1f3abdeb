// DecideOnce (store/decide_once.hpp): participants are threads, each with its
// own connection to a real store server on loopback (a port the OS picks),
// as the ranks of a shrink or the nodes of an elastic round are.
#include "store/decide_once.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/records.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

struct DecideOnceTest : ::testing::Test {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};

  std::unique_ptr<TcpStore> client() const {
    TcpStoreOptions o;
    o.port = server.port();
    o.timeout = 10s;
    o.connect_timeout = 10s;
    return std::make_unique<TcpStore>(o);
  }

  // Participants arrive as members (rank, "host-RANK") and name themselves
  // "rank R"; the decision here is one member record: who decided.
  static DecideOnce::Terms terms() {
    return {"agree/0", "the test's decision", "start every participant",
            [](const records::Record& r) { return fmt::format("rank {}", r.fields.at(0)); }};
  }

  static std::vector<std::string> names(int n) {
    std::vector<std::string> out;
    for (int r = 0; r < n; ++r) out.push_back(fmt::format("rank {}", r));
    return out;
  }

  // Each of `arriving` participants arrives, then settles: once all of
  // `expected` are listed, it proposes itself as the decider. Returns what
  // each read, or the text of what it threw.
  std::vector<std::string> run(int arriving, int expected, std::chrono::milliseconds budget) const {
    std::vector<std::future<std::string>> each;
    for (int r = 0; r < arriving; ++r) {
      each.push_back(std::async(std::launch::async, [this, r, expected, budget]() -> std::string {
        const auto store = client();
        DecideOnce agreement(*store, terms());
        try {
          const Deadline dl(budget);
          agreement.arrive(records::encode_member({r, fmt::format("host-{}", r)}));
          return agreement.settle(
              dl, 5ms,
              [&](bool) -> std::optional<std::string> {
                if (agreement.count() < expected) return std::nullopt;
                return records::encode_member({r, "decider"});
              },
              names(expected));
        } catch (const TimeoutError& e) {
          return std::string("timeout: ") + e.what();
        }
      }));
    }
    std::vector<std::string> out;
    for (auto& f : each) out.push_back(f.get());
    return out;
  }
};

TEST_F(DecideOnceTest, TheFirstDecisionWinsAndEveryParticipantReadsIt) {
  const std::vector<std::string> read = run(6, 6, 10s);
  // One value for all: a member record naming one of the participants.
  const std::set<std::string> distinct(read.begin(), read.end());
  ASSERT_EQ(distinct.size(), 1u) << read[0] << " | " << read[1];
  const auto decided = records::decode_members(read[0], "decision");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].host, "decider");
  EXPECT_GE(decided[0].rank, 0);
  EXPECT_LT(decided[0].rank, 6);
  // And it is the one the store holds: a later decider gets it back.
  const auto late = client();
  DecideOnce again(*late, terms());
  EXPECT_EQ(again.decide(records::encode_member({99, "late"})), read[0]);
  EXPECT_EQ(again.decision(0ms), read[0]);
  EXPECT_EQ(records::decode_arrivals(again.arrivals(), "arrivals").members.size(), 6u);
  EXPECT_EQ(again.count(), 6);
}

TEST_F(DecideOnceTest, ASecondDecideGetsTheFirstBack) {
  const auto a = client();
  const auto b = client();
  DecideOnce first(*a, terms());
  DecideOnce second(*b, terms());
  EXPECT_EQ(first.decision(0ms), std::nullopt);
  const std::string one = records::encode_member({1, "first"});
  EXPECT_EQ(first.decide(one), one);
  EXPECT_EQ(second.decide(records::encode_member({2, "second"})), one);
  EXPECT_EQ(second.await(Deadline(1s)), one);
  EXPECT_THROW(second.decide(""), Error);
}

TEST_F(DecideOnceTest, AParticipantThatNeverArrivesEndsInABoundedTimeoutNamingIt) {
  // Three expected, ranks 0 and 1 arrive: nobody may decide.
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> read = run(2, 3, 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 5s);
  for (const std::string& r : read) {
    EXPECT_EQ(r.rfind("timeout: Timed out waiting 300 ms for the test's decision (store key 'agree/0/decision')", 0),
              0u)
        << r;
    EXPECT_NE(r.find("in store key 'agree/0/arrived', arrived: rank "), std::string::npos) << r;
    EXPECT_NE(r.find("; missing: rank 2; start every participant"), std::string::npos) << r;
    EXPECT_NE(r.find("rank 0"), std::string::npos) << r;
    EXPECT_NE(r.find("rank 1"), std::string::npos) << r;
    EXPECT_NE(r.find("start every participant"), std::string::npos) << r;
  }
  // No decision was fixed by anyone.
  const auto look = client();
  EXPECT_FALSE(look->check({"agree/0/decision"}));
}

TEST_F(DecideOnceTest, AWaitWithNobodyArrivedSaysSo) {
  const auto s = client();
  DecideOnce agreement(*s, terms());
  try {
    agreement.await(Deadline(50ms), {"rank 0"});
    FAIL() << "no decision, yet await returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("nobody arrived; missing: rank 0"), std::string::npos) << e.what();
  }
}

TEST_F(DecideOnceTest, ADecisionWithBadBytesRaisesRecordErrorNamingTheKey) {
  const auto s = client();
  s->set("agree/0/decision", to_bytes("3@host;"));
  DecideOnce agreement(*s, terms());
  for (int how = 0; how < 3; ++how) {
    try {
      if (how == 0) (void)agreement.decision(0ms);
      if (how == 1) (void)agreement.await(Deadline(1s));
      if (how == 2) (void)agreement.decide(records::encode_member({0, "h"}));
      FAIL() << "bad bytes were read as a decision (" << how << ")";
    } catch (const records::RecordError& e) {
      EXPECT_NE(std::string(e.what()).find("store key 'agree/0/decision'"), std::string::npos) << e.what();
    }
  }
  // An empty value is no decision either.
  s->set("agree/1/decision", {});
  DecideOnce empty(*s, {"agree/1", "the test's decision", "", {}});
  EXPECT_THROW((void)empty.decision(0ms), records::RecordError);
}

TEST_F(DecideOnceTest, BadArrivalsAreNamedByTheirKey) {
  const auto s = client();
  s->append("agree/0/arrived", to_bytes("not records"));
  DecideOnce agreement(*s, terms());
  try {
    (void)agreement.arrivals();
    FAIL();
  } catch (const records::RecordError& e) {
    EXPECT_NE(std::string(e.what()).find("store key 'agree/0/arrived'"), std::string::npos) << e.what();
  }
  // A timeout's message still comes, saying what it could not read.
  try {
    agreement.await(Deadline(20ms));
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("the arrivals could not be read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mci
