// Work handles on host backends: waiting on a stream means waiting on the host.
#include <gtest/gtest.h>

#include <vector>

#include "mci/mci.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

TEST(Work, WaitStreamOnHostWorkWaitsForTheResult) {
  auto errors = test::run_ranks(2, [](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> a(1 << 20, static_cast<float>(pg->rank() + 1));
    Work w = pg->all_reduce(view(a), ReduceOp::sum, Exec::async);
    w.wait_stream(nullptr);  // no device fence: returns once the host work is done
    EXPECT_TRUE(w.is_completed());
    for (float x : a) ASSERT_EQ(x, 3.0f);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(Work, WaitStreamRethrowsAFailure) {
  auto errors = test::run_ranks(
      2,
      [](std::shared_ptr<ProcessGroup> pg) {
        if (pg->rank() == 1) return;  // never enters: rank 0 times out or sees it leave
        std::vector<float> a(8);
        Work w = pg->all_reduce(view(a), ReduceOp::sum, Exec::async);
        EXPECT_THROW(w.wait_stream(nullptr), Error);
      },
      "cpu", std::chrono::milliseconds(500));
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace mci
