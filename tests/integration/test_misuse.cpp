// Every misuse gets a clear error on the rank that made it, its peers fail
// promptly instead of hanging, and no buffer is touched.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../support/job.hpp"
#include "../support/rank.hpp"

namespace mci::test {
namespace {

// One misuse per case (MCI_TEST_CASE); prints what each rank got. Buffers
// must come out untouched when the call fails.
MCI_SCENARIO(misuse) {
  const std::string c = std::getenv("MCI_TEST_CASE") ? std::getenv("MCI_TEST_CASE") : "";
  const long long me = env_ll("RANK", 0);
  if (c == "world-size" && me == 1) ::setenv("WORLD_SIZE", "3", 1);
  if (c == "algo" && me == 0) ::setenv("MCI_ALGO", "ring", 1);
  if (c == "bad-algo") ::setenv("MCI_ALGO", "fastest", 1);
  auto pg = join();
  const int r = pg->rank();
  std::vector<float> f(r == 0 && c == "count" ? 4 : 8, 1.5f);
  const std::vector<float> before = f;
  std::vector<std::int32_t> i(8, 7);
  auto check_untouched = [&] {
    if (f != before) {
      say("BUFFER CHANGED");
      std::_Exit(exit_code::buffer_changed);
    }
  };
  try {
    if (c == "count" || c == "algo") {
      pg->all_reduce(mci::view(f));
    } else if (c == "dtype") {
      if (r == 0)
        pg->all_reduce(mci::view(f));
      else
        pg->all_reduce(mci::view(i));
    } else if (c == "op") {
      pg->all_reduce(mci::view(f), r == 0 ? mci::ReduceOp::sum : mci::ReduceOp::max);
    } else if (c == "root") {
      // Both ranks think they are the root: no data reaches anyone in the
      // broadcast itself; the next collective finds the stray frame.
      pg->broadcast(mci::view(f), r == 0 ? 0 : 1);
      pg->barrier();
    } else if (c == "bad-root") {
      pg->broadcast(mci::view(f), r == 0 ? 5 : 0);
    } else if (c == "p2p-count") {
      if (r == 0) {
        pg->send(BufferView{f.data(), 4, DType::f32}, 1, 0);
      } else if (r == 1) {
        pg->recv(mci::view(f), 0, 0);
      }
    } else if (c == "after-error") {
      try {
        pg->all_reduce(mci::view(f), r == 0 ? mci::ReduceOp::sum : mci::ReduceOp::min);
      } catch (const mci::Error& e) {
        say(fmt::format("first error: {}", e.what()));
      }
      pg->barrier();
    } else {
      pg->barrier();
    }
  } catch (...) {
    check_untouched();
    throw;
  }
  check_untouched();
  return 0;
}

struct Outcome {
  std::vector<int> codes;
  std::string out;
};

Outcome run_case(const std::string& c, int world = 2, std::map<std::string, std::string> env = {}) {
  env["MCI_TEST_CASE"] = c;
  env.emplace("MCI_TEST_TIMEOUT_MS", "20000");
  Job job(world, Scenario{"misuse"}, env);
  job.wait(std::chrono::seconds(40));
  Outcome o;
  for (int r = 0; r < world; ++r) {
    EXPECT_FALSE(job.status(r).timed_out) << c << "\n" << job.all_output();
    EXPECT_NE(job.status(r).code, exit_code::buffer_changed) << "a buffer was modified\n" << job.all_output();
    o.codes.push_back(job.status(r).code);
  }
  o.out = job.all_output();
  return o;
}

bool has(const Outcome& o, const std::string& text) { return o.out.find(text) != std::string::npos; }

TEST(Misuse, DifferentCountsAreAMismatch) {
  auto o = run_case("count");
  EXPECT_TRUE(has(o, "MismatchError")) << o.out;
  EXPECT_TRUE(has(o, "all_reduce #1 (f32 x 4, sum)")) << o.out;
  EXPECT_TRUE(has(o, "all_reduce #1 (f32 x 8, sum)")) << o.out;
}

TEST(Misuse, DifferentDtypesAreAMismatch) {
  auto o = run_case("dtype");
  EXPECT_TRUE(has(o, "all_reduce #1 (f32 x 8, sum)") && has(o, "all_reduce #1 (i32 x 8, sum)")) << o.out;
  EXPECT_TRUE(has(o, "MismatchError")) << o.out;
}

TEST(Misuse, DifferentOpsAreAMismatch) {
  auto o = run_case("op");
  EXPECT_TRUE(has(o, "(f32 x 8, sum)") && has(o, "(f32 x 8, max)")) << o.out;
}

TEST(Misuse, DifferentRootsAreCaughtInSharedMemory) {
  auto o = run_case("root");
  EXPECT_TRUE(has(o, "MismatchError")) << o.out;
  EXPECT_TRUE(has(o, "called broadcast #1 (f32 x 8, root 0) but rank 1 called broadcast #1 (f32 x 8, root 1)"))
      << o.out;
}

TEST(Misuse, DifferentRootsOverTcpAreCaughtByTheNextCollective) {
  // Over TCP both "roots" only send, so the broadcast itself sees nothing;
  // the stray frame trips the next collective.
  auto o = run_case("root", 2, {{"MCI_TRANSPORT", "tcp"}});
  EXPECT_TRUE(has(o, "MismatchError")) << o.out;
  EXPECT_TRUE(has(o, "broadcast #1 (f32 x 8, root 0)") || has(o, "broadcast #1 (f32 x 8, root 1)")) << o.out;
  EXPECT_TRUE(has(o, "barrier #2")) << o.out;
}

TEST(Misuse, DifferentSettingsOnTheRanksAreRefusedAtInit) {
  auto o = run_case("algo");
  EXPECT_EQ(o.codes[0], exit_code::config) << o.out;
  EXPECT_EQ(o.codes[1], exit_code::config) << o.out;
  EXPECT_TRUE(has(o, "the ranks disagree on mci's settings")) << o.out;
  EXPECT_TRUE(has(o, "MCI_ALGO=ring") && has(o, "MCI_ALGO=auto")) << o.out;
}

TEST(Misuse, UnknownAlgorithmIsAConfigError) {
  auto o = run_case("bad-algo", 1);
  EXPECT_EQ(o.codes[0], exit_code::config) << o.out;
  EXPECT_TRUE(has(o, "MCI_ALGO='fastest' is not an algorithm")) << o.out;
}

TEST(Misuse, WaitSettingsOutOfRangeAreAConfigError) {
  auto o = run_case("wait-setting", 1, {{"MCI_SHM_YIELD_US", "-5"}});
  EXPECT_EQ(o.codes[0], exit_code::config) << o.out;
  EXPECT_TRUE(has(o, "MCI_SHM_YIELD_US=-5 is out of range: use 0 .. 1000000 (microseconds)")) << o.out;
}

TEST(Misuse, UnknownClockIsAConfigError) {
  auto o = run_case("clock-setting", 1, {{"MCI_CLOCK", "tsc"}});
  EXPECT_EQ(o.codes[0], exit_code::config) << o.out;
  EXPECT_TRUE(has(o, "MCI_CLOCK='tsc' is not a clock mci knows: use auto")) << o.out;
}

TEST(Misuse, RootOutOfRangeFailsThereAndPeersHearWhy) {
  auto o = run_case("bad-root");
  EXPECT_EQ(o.codes[0], exit_code::config) << o.out;
  EXPECT_TRUE(has(o, "invalid broadcast on rank 0: root 5 is out of range: the group has ranks 0..1")) << o.out;
  EXPECT_EQ(o.codes[1], exit_code::peer) << o.out;
  EXPECT_TRUE(has(o, "PeerError(peer 0): rank 0 aborted the group")) << o.out;
}

TEST(Misuse, PointToPointSizesMustAgree) {
  auto o = run_case("p2p-count");
  EXPECT_TRUE(has(o, "point-to-point mismatch between rank 1 and rank 0")) << o.out;
  EXPECT_TRUE(has(o, "(f32 x 8)") && has(o, "(f32 x 4)")) << o.out;
}

TEST(Misuse, AGroupIsUnusableAfterAnErrorAndSaysSo) {
  auto o = run_case("after-error");
  EXPECT_TRUE(has(o, "first error:")) << o.out;
  EXPECT_TRUE(has(o, "the group was aborted after an earlier error")) << o.out;
}

TEST(Misuse, DifferentWorldSizesAreRefusedAtInit) {
  auto o = run_case("world-size");
  EXPECT_TRUE(has(o, "WORLD_SIZE disagrees between processes")) << o.out;
  // The other rank is told, instead of waiting for the timeout.
  EXPECT_TRUE(has(o, "could not join the group, so rank")) << o.out;
}

}  // namespace
}  // namespace mci::test
