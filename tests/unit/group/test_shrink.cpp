// ProcessGroup::shrink: the survivors of a group agree on who is gone and go
// on in a group of their own. Ranks are threads here, each with its own
// store connection: a rank "dies" by dropping its group and its store client
// (the store sees the connection end, and the peers their sockets close, as
// when a process is killed; the
// process-level kills are in tests/integration/test_elastic_train.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mci/mci.hpp"
#include "store/records.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

struct Job {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
  std::shared_ptr<TcpStore> client() const {
    TcpStoreOptions so;
    so.port = server.port();
    so.timeout = 10s;
    return std::make_shared<TcpStore>(so);
  }
  // The group of `world` threads; `body(rank, group)` returns what the test
  // checks, or the text of what it threw.
  std::vector<std::string> run(int world, std::chrono::milliseconds timeout,
                               const std::function<std::string(int, std::shared_ptr<ProcessGroup>)>& body,
                               const std::string& backend = "cpu") const {
    std::vector<std::string> out(static_cast<std::size_t>(world));
    std::vector<std::thread> ts;
    for (int r = 0; r < world; ++r) {
      ts.emplace_back([&, r] {
        try {
          InitOptions o;
          o.store = client();
          o.rank = r;
          o.world_size = world;
          o.timeout = timeout;
          o.backend = backend;
          // Threads share a process: shared memory would see a thread's
          // group go only at the timeout (it watches processes); sockets
          // close with the group.
          o.settings = {{"MCI_TRANSPORT", "tcp"}};
          out[static_cast<std::size_t>(r)] = body(r, init_process_group(o));
        } catch (const std::exception& e) {
          out[static_cast<std::size_t>(r)] = std::string("error: ") + e.what();
        }
      });
    }
    for (auto& t : ts) t.join();
    return out;
  }
};

// A survivor: its next collective fails (the peer is gone), then it
// shrinks and checks the new group with an all-reduce of old ranks.
std::string survive(std::shared_ptr<ProcessGroup> pg) {
  std::vector<float> v{1.0f};
  try {
    pg->all_reduce(view(v));
    return "the all-reduce with a lost rank succeeded";
  } catch (const PeerError&) {
  }
  const int old_rank = pg->rank();
  auto s = pg->shrink();
  std::vector<float> who{static_cast<float>(old_rank)};
  s.group->all_reduce(view(who));
  std::string kept, lost;
  for (int k : s.kept) kept += std::to_string(k);
  for (int l : s.lost) lost += std::to_string(l);
  return fmt::format("rank {} of {} kept {} lost {} sum {}", s.group->rank(), s.group->size(), kept, lost, who[0]);
}

TEST(Shrink, SurvivorsOfOneLostRankGoOnRenumberedInTheirOldOrder) {
  Job job;
  const auto out = job.run(4, 10s, [](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 2) return "lost";  // its group and store client go: what a killed process leaves
    return survive(std::move(pg));
  });
  EXPECT_EQ(out[0], "rank 0 of 3 kept 013 lost 2 sum 4");
  EXPECT_EQ(out[1], "rank 1 of 3 kept 013 lost 2 sum 4");
  EXPECT_EQ(out[3], "rank 2 of 3 kept 013 lost 2 sum 4");
}

TEST(Shrink, OnGlooTheSurvivorsGetANewGlooContextOverTheStore) {
  if (!backend_available("gloo")) GTEST_SKIP() << "this build has no gloo backend";
  Job job;
  const auto out = job.run(
      3, 10s,
      [](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
        if (r == 0) return "lost";
        auto s = survive(std::move(pg));
        return s;
      },
      "gloo");
  EXPECT_EQ(out[1], "rank 0 of 2 kept 12 lost 0 sum 3");
  EXPECT_EQ(out[2], "rank 1 of 2 kept 12 lost 0 sum 3");
}

TEST(Shrink, TwoRanksLostAtOnce) {
  Job job;
  const auto out = job.run(5, 10s, [](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 1 || r == 3) return "lost";
    return survive(std::move(pg));
  });
  EXPECT_EQ(out[0], "rank 0 of 3 kept 024 lost 13 sum 6");
  EXPECT_EQ(out[2], "rank 1 of 3 kept 024 lost 13 sum 6");
  EXPECT_EQ(out[4], "rank 2 of 3 kept 024 lost 13 sum 6");
}

TEST(Shrink, ARankLostDuringTheAgreementIsLeftOutToo) {
  Job job;
  const auto out = job.run(4, 10s, [&](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 1) return "lost";
    if (r == 2) {
      // Rank 2 sees the loss too, then goes once ranks 0 and 3 are inside
      // shrink(): it had not arrived, so they wait for it until the store
      // sees it gone.
      std::vector<float> v{1.0f};
      try {
        pg->all_reduce(view(v));
      } catch (const PeerError&) {
      }
      auto watch = job.client();
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while (std::chrono::steady_clock::now() < give_up) {
        const auto arrived = to_string(watch->append("mci/default/0/shrink/0/arrived", {}));
        if (records::decode_arrivals(arrived, "arrivals").members.size() >= 2) return "lost during the agreement";
        std::this_thread::sleep_for(1ms);
      }
      return "ranks 0 and 3 never reached shrink()";
    }
    return survive(std::move(pg));
  });
  EXPECT_EQ(out[0], "rank 0 of 2 kept 03 lost 12 sum 3");
  EXPECT_EQ(out[3], "rank 1 of 2 kept 03 lost 12 sum 3");
}

TEST(Shrink, ExcludedRanksAreLeftOutAndRefusedIfTheyComeToo) {
  Job job;
  const auto out = job.run(3, 10s, [](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 2) {
      try {
        pg->shrink({2});
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("this rank is excluded"), std::string::npos) << e.what();
      }
      pg->shrink();  // refused: the others exclude it
      return "rank 2 was kept";
    }
    auto s = pg->shrink({2});
    std::vector<float> v{1.0f};
    s.group->all_reduce(view(v));
    return fmt::format("{} of {} sum {}", s.group->rank(), s.group->size(), v[0]);
  });
  EXPECT_EQ(out[0], "0 of 2 sum 2");
  EXPECT_EQ(out[1], "1 of 2 sum 2");
  EXPECT_NE(out[2].find("rank 2 was left out when its group of 3 shrank"), std::string::npos) << out[2];
  EXPECT_NE(out[2].find("cannot rejoin"), std::string::npos) << out[2];
}

TEST(Shrink, ARankThoughtLostThatComesBackIsRefusedAndCannotReachTheNewGroup) {
  // Rank 2 is alive but does not come within the group's timeout (a stopped
  // process, a long pause): the others go on without it. When it comes
  // back, shrink() refuses it and its old group is broken, so it can never
  // mix into a collective of the new group.
  Job job;
  std::promise<void> decided;
  std::shared_future<void> done = decided.get_future().share();
  const auto out = job.run(3, 1500ms, [&](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 2) {
      done.wait();
      std::vector<float> v{1.0f};
      std::string old_group;
      try {
        pg->all_reduce(view(v));
      } catch (const Error& e) {
        old_group = e.what();
      }
      try {
        pg->shrink();
        return "rank 2 was kept";
      } catch (const PeerError& e) {
        return fmt::format("old group: {} | shrink: {}", old_group.empty() ? "worked" : "fails", e.what());
      }
    }
    auto s = pg->shrink();
    std::vector<float> v{1.0f};
    s.group->all_reduce(view(v));
    if (r == 1) decided.set_value();
    return fmt::format("{} of {} sum {}", s.group->rank(), s.group->size(), v[0]);
  });
  EXPECT_EQ(out[0], "0 of 2 sum 2");
  EXPECT_EQ(out[1], "1 of 2 sum 2");
  EXPECT_NE(out[2].find("old group: fails | shrink: rank 2 was left out"), std::string::npos) << out[2];
}

TEST(Shrink, AGroupCanShrinkAgain) {
  Job job;
  const auto out = job.run(4, 10s, [](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 3) return "lost first";
    auto s = pg->shrink();
    if (r == 0) return "lost second";
    return survive(s.group);
  });
  EXPECT_EQ(out[1], "rank 0 of 2 kept 12 lost 0 sum 3");
  EXPECT_EQ(out[2], "rank 1 of 2 kept 12 lost 0 sum 3");
}

// Replacing: a process calls join_running_group() and waits; the members
// see it at a step boundary (joiners_waiting, the same answer on every
// rank) and grow the group, the newcomer as its last rank.
std::shared_ptr<ProcessGroup> joiner(const Job& job) {
  InitOptions o;
  o.store = job.client();
  o.rank = 0;  // not used: the running group gives its rank
  o.world_size = 1;
  o.timeout = 10s;
  o.settings = {{"MCI_TRANSPORT", "tcp"}};
  return join_running_group(o);
}

// A member: steps (here, one all-reduce each) until a joiner waits, then
// grows; returns the grown group.
std::shared_ptr<ProcessGroup> step_until_joined(std::shared_ptr<ProcessGroup> pg) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!pg->joiners_waiting()) {
    if (std::chrono::steady_clock::now() > give_up) throw Error("no joiner came within 10 s");
    std::vector<float> step{1.0f};
    pg->all_reduce(view(step));
  }
  return pg->grow().group;
}

std::string ranks_sum(ProcessGroup& g) {
  std::vector<float> v{static_cast<float>(g.rank())};
  g.all_reduce(view(v));
  return fmt::format("{} of {} sum {}", g.rank(), g.size(), v[0]);
}

TEST(Grow, AReplacementJoinsAtAStepBoundaryAsTheLastRank) {
  Job job;
  std::string newcomer;
  std::thread late([&] {
    try {
      newcomer = ranks_sum(*joiner(job));
    } catch (const std::exception& e) {
      newcomer = std::string("error: ") + e.what();
    }
  });
  const auto out = job.run(3, 10s, [](int, std::shared_ptr<ProcessGroup> pg) {
    return ranks_sum(*step_until_joined(std::move(pg)));
  });
  late.join();
  EXPECT_EQ(out, (std::vector<std::string>{"0 of 4 sum 6", "1 of 4 sum 6", "2 of 4 sum 6"}));
  EXPECT_EQ(newcomer, "3 of 4 sum 6");
}

TEST(Grow, AReplacementFindsTheGroupAfterAShrinkAndTheWorldIsBackToItsSize) {
  // Rank 1 is lost; its replacement starts at once (as mcirun's replace
  // does), possibly before the survivors have shrunk: it follows the group
  // to its new session and joins it there.
  Job job;
  std::string newcomer;
  std::promise<void> lost;
  std::thread late([&] {
    lost.get_future().wait();
    try {
      newcomer = ranks_sum(*joiner(job));
    } catch (const std::exception& e) {
      newcomer = std::string("error: ") + e.what();
    }
  });
  const auto out = job.run(4, 10s, [&](int r, std::shared_ptr<ProcessGroup> pg) -> std::string {
    if (r == 1) {
      pg.reset();  // its group and store client go: the loss
      lost.set_value();
      return "lost";
    }
    std::vector<float> v{1.0f};
    try {
      pg->all_reduce(view(v));
    } catch (const PeerError&) {
    }
    return ranks_sum(*step_until_joined(pg->shrink().group));
  });
  late.join();
  EXPECT_EQ(out[0], "0 of 4 sum 6");
  EXPECT_EQ(out[2], "1 of 4 sum 6");
  EXPECT_EQ(out[3], "2 of 4 sum 6");
  EXPECT_EQ(newcomer, "3 of 4 sum 6");
}

}  // namespace
}  // namespace mci
