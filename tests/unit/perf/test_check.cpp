// Check data: inputs every rank can compute for any other, references exact
// in every dtype, and counting of wrong elements across periods.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "perf/check.hpp"

namespace mci::perf {
namespace {

TEST(PerfCheck, InputsAreSmallIntegersExactInEveryType) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
    for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{77}, kPeriod - 1}) {
      const double v = input_value(t, 3, 5, i, false);
      EXPECT_EQ(v, std::trunc(v));
      const double n = input_value(t, 3, 5, i, true);
      if (t != DType::u8) {  // u8 wraps negatives to 251..255
        EXPECT_LE(std::abs(v), 5.0);
        EXPECT_LE(std::abs(n), 2.0);
      }
    }
  }
}

TEST(PerfCheck, ValuesRepeatEveryPeriod) {
  EXPECT_EQ(input_value(DType::f32, 1, 2, 5, false), input_value(DType::f32, 1, 2, 5 + kPeriod, false));
  EXPECT_EQ(reduced_value(DType::i32, ReduceOp::sum, 3, 1, 9, false),
            reduced_value(DType::i32, ReduceOp::sum, 3, 1, 9 + 2 * kPeriod, false));
}

TEST(PerfCheck, ReferenceReducesEveryRanksInput) {
  const std::size_t i = 42;
  double sum = 0, mx = -1e9;
  for (int r = 0; r < 4; ++r) {
    sum += input_value(DType::f64, r, 7, i, false);
    mx = std::max(mx, input_value(DType::f64, r, 7, i, false));
  }
  EXPECT_EQ(reduced_value(DType::f64, ReduceOp::sum, 4, 7, i, false), sum);
  EXPECT_EQ(reduced_value(DType::f64, ReduceOp::max, 4, 7, i, false), mx);
  EXPECT_EQ(reduced_value(DType::f64, ReduceOp::avg, 4, 7, i, false), sum / 4);
  EXPECT_EQ(reduced_value(DType::i32, ReduceOp::avg, 4, 7, i, false), std::trunc(sum / 4));
}

TEST(PerfCheck, FillThenCountFindsNothingWrong) {
  for (DType t : {DType::f32, DType::bf16, DType::i8, DType::i64}) {
    const std::size_t n = 3 * kPeriod + 17;
    std::vector<std::uint8_t> buf(n * dtype_size(t));
    auto f = [&](std::size_t i) { return input_value(t, 2, 9, i, false); };
    fill_values(t, buf.data(), n, f);
    EXPECT_EQ(count_wrong(t, buf.data(), n, f), 0u);
    for (std::size_t i : {std::size_t{0}, kPeriod + 1, n - 1}) EXPECT_EQ(get_value(t, buf.data(), i), f(i));
  }
}

TEST(PerfCheck, CountsEveryWrongElementInEveryPeriod) {
  const DType t = DType::f32;
  const std::size_t n = 2 * kPeriod + 100;
  std::vector<float> buf(n);
  auto f = [&](std::size_t i) { return input_value(t, 0, 1, i, false); };
  fill_values(t, buf.data(), n, f);
  buf[3] += 1;
  buf[kPeriod + 3] += 1;
  buf[n - 1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(count_wrong(t, buf.data(), n, f), 3u);
}

// A block of the output that landed at the wrong place reads as wrong,
// whatever the distance it moved by (but whole periods): the data has no
// shorter pattern. The old linear formula repeated every 11 elements, so a
// block moved by a multiple of 11 passed.
TEST(PerfCheck, ABlockMovedByAnyDistanceIsCaught) {
  const DType t = DType::f32;
  const std::size_t n = kPeriod + 4096;
  std::vector<float> want(n);
  auto f = [&](std::size_t i) { return input_value(t, 3, 4, i, false); };
  fill_values(t, want.data(), n, f);
  for (std::size_t shift : {std::size_t{1}, std::size_t{11}, std::size_t{64}, std::size_t{1024}, std::size_t{2048}}) {
    std::vector<float> got = want;
    // 1024 elements taken from `shift` further on: a misplaced block.
    std::memcpy(got.data() + 100, want.data() + 100 + shift, 1024 * sizeof(float));
    EXPECT_GT(count_wrong(t, got.data(), n, f), 1024u / 2) << "a block moved by " << shift << " elements";
  }
}

TEST(PerfCheck, SentinelIsWrongForEveryType) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
    std::vector<std::uint8_t> buf(64 * dtype_size(t));
    fill_sentinel(buf.data(), buf.size());
    EXPECT_EQ(count_wrong(t, buf.data(), 64, [&](std::size_t i) { return input_value(t, 1, 0, i, false); }), 64u)
        << dtype_name(t);
  }
}

TEST(PerfCheck, FloatsGetAFewUlpsForAvgIntegersNone) {
  float x = 1.0f / 3.0f;
  float near = std::nextafter(x, 1.0f);
  EXPECT_EQ(count_wrong(DType::f32, &near, 1, [&](std::size_t) { return static_cast<double>(x); }), 0u);
  std::int32_t k = 5;
  EXPECT_EQ(count_wrong(DType::i32, &k, 1, [](std::size_t) { return 4.0; }), 1u);
}

}  // namespace
}  // namespace mci::perf
