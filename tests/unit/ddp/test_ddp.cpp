#include <gtest/gtest.h>

#include <mutex>

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

}  // namespace
}  // namespace mci
