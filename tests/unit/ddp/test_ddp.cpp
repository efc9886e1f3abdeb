#include <gtest/gtest.h>

#include <mutex>

#include <fmt/format.h>

#include "../../support/thread_ranks.hpp"
#include "mci/mci.hpp"

namespace mci {
namespace {

TEST(Ddp, ParametersStartFromRankZeroAndGradientsAreAveraged) {
  constexpr int kWorld = 3;
  std::mutex mu;
  std::vector<std::vector<float>> final_grads(kWorld);
  auto errors = test::run_ranks(kWorld, [&](std::shared_ptr<ProcessGroup> pg) {
    const int r = pg->rank();
    std::vector<float> w1(5, 10.0f + r), g1(5);
    std::vector<double> w2(3, 20.0 + r), g2(3);
    std::vector<float> w3(1000, 30.0f + r), g3(1000);
    DdpOptions o;
    o.bucket_cap_bytes = 64;  // several buckets
    DistributedDataParallel ddp(pg,
                                {{"w1", view(w1), view(g1)}, {"w2", view(w2), view(g2)}, {"w3", view(w3), view(g3)}},
                                o);
    EXPECT_GE(ddp.num_buckets(), 2u);
    EXPECT_EQ(w1[4], 10.0f);
    EXPECT_EQ(w2[0], 20.0);
    EXPECT_EQ(w3[999], 30.0f);
    for (int step = 0; step < 2; ++step) {
      for (std::size_t i = 0; i < g1.size(); ++i) g1[i] = static_cast<float>((r + 1) * (i + 1) + step);
      for (std::size_t i = 0; i < g2.size(); ++i) g2[i] = (r + 1) * 0.5 + static_cast<double>(i);
      for (std::size_t i = 0; i < g3.size(); ++i) g3[i] = static_cast<float>(r * 3);
      // Ranks finish their gradients in different orders; rank 2 marks none.
      if (r == 0) {
        for (std::size_t i : {0, 1, 2}) ddp.grad_ready(i);
      } else if (r == 1) {
        for (std::size_t i : {2, 1, 0}) ddp.grad_ready(i);
      }
      ddp.finish_gradient_sync();
      for (std::size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g1[i], static_cast<float>(2 * (i + 1) + step));
      for (std::size_t i = 0; i < g2.size(); ++i) EXPECT_EQ(g2[i], 1.0 + static_cast<double>(i));
      for (float x : g3) EXPECT_EQ(x, 3.0f);
    }
    std::lock_guard lk(mu);
    final_grads[r] = g1;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(final_grads[0], final_grads[1]);
  EXPECT_EQ(final_grads[1], final_grads[2]);
}

TEST(Ddp, DifferentModelsOnDifferentRanksAreRefused) {
  auto errors = test::run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> w(pg->rank() == 0 ? 4 : 5), g(w.size());
    DistributedDataParallel ddp(pg, {{"w", view(w), view(g)}});
  });
  for (const auto& e : errors) EXPECT_NE(e.find("the model differs between ranks"), std::string::npos) << e;
  EXPECT_NE(errors[0].find("at parameter 0 'w': rank 0 has 4 f32 values, rank 1 has 5 f32 values"), std::string::npos)
      << errors[0];
}

TEST(Ddp, TheFirstParameterThatDiffersIsNamed) {
  auto errors = test::run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> a(3), ga(3), b(2), gb(2);
    std::vector<double> c(4), gc(4);
    std::vector<Parameter> params{{"embed", view(a), view(ga)}, {"bias", view(b), view(gb)}};
    if (pg->rank() == 1) params.push_back({"extra", view(c), view(gc)});
    DistributedDataParallel ddp(pg, params);
  });
  EXPECT_NE(errors[0].find("at parameter 2 (none here): rank 0 has no parameter, rank 1 has 4 f64 values"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("at parameter 2 'extra': rank 1 has 4 f64 values, rank 0 has no parameter"),
            std::string::npos)
      << errors[1];
}

TEST(Ddp, MisuseIsExplained) {
  auto errors = test::run_ranks(1, [&](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> w(4), g(3);
    try {
      DistributedDataParallel bad(pg, {{"w", view(w), view(g)}});
      ADD_FAILURE();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("gradient must match"), std::string::npos);
    }
    std::vector<float> g2(4);
    DistributedDataParallel ddp(pg, {{"w", view(w), view(g2)}});
    ddp.grad_ready(0);
    EXPECT_THROW(ddp.grad_ready(0), ConfigError);
    EXPECT_THROW(ddp.grad_ready(7), ConfigError);
    ddp.finish_gradient_sync();
  });
  EXPECT_EQ(errors[0], "");
}

// recover(): after a lost rank, the survivors take the model of the one
// that completed the most steps, and the interrupted step's partial sums
// never reach anyone's parameters.
TEST(DdpRecover, SurvivorsTakeTheMostAdvancedReplicaAndRedoTheStep) {
  constexpr int kWorld = 4;
  std::mutex mu;
  std::vector<std::string> seen(kWorld);
  auto errors = test::run_ranks(
      kWorld,
      [&](std::shared_ptr<ProcessGroup> pg) {
        const int r = pg->rank();
        std::vector<float> w(6, 1.0f), g(6);
        std::vector<float> momentum(6, 0.0f);
        DdpOptions o;
        o.bucket_cap_bytes = 8;  // three buckets of two
        DistributedDataParallel ddp(pg, {{"w", view(w), view(g)}}, o);
        std::uint64_t steps = 0;
        // Step 1 on every rank.
        std::fill(g.begin(), g.end(), static_cast<float>(r));
        ddp.finish_gradient_sync();  // the average: 1.5
        for (std::size_t i = 0; i < w.size(); ++i) {
          momentum[i] = g[i];
          w[i] -= g[i];
        }
        ++steps;
        if (r == 3) return;  // lost before step 2
        // Step 2: rank 1 claims it completed it (as a rank whose all-reduce
        // finished before the loss would), with its own values: the others
        // must take them, and its step count.
        std::fill(g.begin(), g.end(), 100.0f);  // would poison the average if it reached the parameters
        try {
          ddp.finish_gradient_sync();
          ADD_FAILURE() << "rank " << r << ": a step with a lost rank succeeded";
        } catch (const PeerError&) {
        }
        if (r == 1) {
          std::fill(w.begin(), w.end(), -7.0f);
          std::fill(momentum.begin(), momentum.end(), 42.0f);
          steps = 2;
        }
        const auto rec = ddp.recover(steps, {view(momentum)});
        steps = rec.steps_done;
        // Every gradient was dropped: the redone step starts from zero.
        for (float x : g) EXPECT_EQ(x, 0.0f);
        // Step 3 on the three survivors, with their new ranks.
        const int nr = ddp.process_group().rank();
        std::fill(g.begin(), g.end(), static_cast<float>(nr * 2));
        ddp.finish_gradient_sync();  // (0 + 2 + 4) / 3 = 2
        std::lock_guard lk(mu);
        seen[static_cast<std::size_t>(r)] =
            fmt::format("world {} steps {} source {} lost {} w {} m {} g {}", ddp.process_group().size(), steps,
                        rec.source, rec.lost.size() == 1 ? rec.lost[0] : -1, w[5], momentum[0], g[0]);
      },
      // Threads share a process: sockets close with a thread's group, shared
      // memory would only see the process go.
      "cpu", std::chrono::seconds(20),
      [](InitOptions& o) {
        o.settings = {{"MCI_TRANSPORT", "tcp"}};
      });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int r : {0, 1, 2}) {
    EXPECT_EQ(seen[static_cast<std::size_t>(r)], "world 3 steps 2 source 1 lost 3 w -7 m 42 g 2") << "rank " << r;
  }
}

}  // namespace
}  // namespace mci
