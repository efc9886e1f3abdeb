#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string_view>

#include "collectives/blocks.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/select.hpp"

namespace mci::coll {
namespace {

TEST(ReduceKernels, EveryOpOnFloats) {
  std::vector<float> a{1, -2, 3.5f}, b{4, 5, -1};
  auto run = [&](ReduceOp op) {
    auto x = a;
    reduce_into(x.data(), b.data(), 3, DType::f32, op);
    return x;
  };
  EXPECT_EQ(run(ReduceOp::sum), (std::vector<float>{5, 3, 2.5f}));
  EXPECT_EQ(run(ReduceOp::prod), (std::vector<float>{4, -10, -3.5f}));
  EXPECT_EQ(run(ReduceOp::min), (std::vector<float>{1, -2, -1}));
  EXPECT_EQ(run(ReduceOp::max), (std::vector<float>{4, 5, 3.5f}));
  auto s = run(ReduceOp::avg);
  finish_avg(s.data(), 3, DType::f32, 2);
  EXPECT_EQ(s, (std::vector<float>{2.5f, 1.5f, 1.25f}));
}

TEST(ReduceKernels, IntegersWrapInsteadOfOverflowing) {
  std::int32_t a = std::numeric_limits<std::int32_t>::max(), b = 1;
  reduce_into(&a, &b, 1, DType::i32, ReduceOp::sum);
  EXPECT_EQ(a, std::numeric_limits<std::int32_t>::min());
  std::uint8_t u = 200, v = 100;
  reduce_into(&u, &v, 1, DType::u8, ReduceOp::sum);
  EXPECT_EQ(u, 44);
  std::int8_t p = 100, q = 3;
  reduce_into(&p, &q, 1, DType::i8, ReduceOp::prod);
  EXPECT_EQ(p, static_cast<std::int8_t>(300 - 256));
  std::int64_t big = std::numeric_limits<std::int64_t>::max(), two = 2;
  reduce_into(&big, &two, 1, DType::i64, ReduceOp::prod);
  EXPECT_EQ(big, -2);
}

TEST(ReduceKernels, IntegerAverageTruncatesTowardZero) {
  std::int32_t v[3] = {7, -7, 5};
  finish_avg(v, 3, DType::i32, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  EXPECT_EQ(v[2], 2);
}

TEST(ReduceKernels, HalfPrecisionIsReducedInFloat) {
  Half a[2] = {to_half(1.5f), to_half(-3.0f)}, b[2] = {to_half(2.25f), to_half(0.5f)};
  reduce_into(a, b, 2, DType::f16, ReduceOp::sum);
  EXPECT_EQ(to_float(a[0]), 3.75f);
  EXPECT_EQ(to_float(a[1]), -2.5f);
  BFloat16 c[1] = {to_bfloat16(3.0f)}, d[1] = {to_bfloat16(-4.0f)};
  reduce_into(c, d, 1, DType::bf16, ReduceOp::max);
  EXPECT_EQ(to_float(c[0]), 3.0f);
  reduce_to(c, c, d, 1, DType::bf16, ReduceOp::prod);
  EXPECT_EQ(to_float(c[0]), -12.0f);
}

TEST(Blocks, CoverEveryElementOnceWithBalancedSizes) {
  for (std::size_t count : {0, 1, 7, 10, 1000, 1001}) {
    for (int n = 1; n <= 5; ++n) {
      Blocks b{count, n};
      std::size_t next = 0;
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(b.offset(i), next);
        EXPECT_LE(b.size(i), b.size(0));
        EXPECT_GE(b.size(i) + 1, b.size(0));
        next += b.size(i);
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Chunks, EmptyRangeIsOneEmptyChunk) {
  Chunks c{0, 10};
  EXPECT_EQ(c.count(), 1u);
  EXPECT_EQ(c.size(0), 0u);
  Chunks d{25, 10};
  EXPECT_EQ(d.count(), 3u);
  EXPECT_EQ(d.begin(2), 20u);
  EXPECT_EQ(d.size(2), 5u);
}

}  // namespace
}  // namespace mci::coll

namespace mci::coll {
namespace {

#if defined(__x86_64__)
TEST(ReduceKernels, VectorAndBaselineBuildsGiveTheSameBits) {
  // The library's own check (clang 14 rejects "f16c" in __builtin_cpu_supports).
  if (std::string_view(reduce_kernel_name()) != "avx2+f16c") GTEST_SKIP() << "no AVX2+F16C here";
  std::mt19937 rng(3);
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      const std::size_t n = 1003, es = dtype_size(t);
      std::vector<std::uint8_t> a(n * es), b(n * es), x(n * es), y(n * es);
      for (std::size_t i = 0; i < n; ++i) {
        const float va = std::uniform_real_distribution<float>(-100, 100)(rng);
        const float vb = std::uniform_real_distribution<float>(-100, 100)(rng);
        switch (t) {
          case DType::f32:
            reinterpret_cast<float*>(a.data())[i] = va;
            reinterpret_cast<float*>(b.data())[i] = vb;
            break;
          case DType::f64:
            reinterpret_cast<double*>(a.data())[i] = va;
            reinterpret_cast<double*>(b.data())[i] = vb;
            break;
          case DType::f16:
            reinterpret_cast<Half*>(a.data())[i] = to_half(va);
            reinterpret_cast<Half*>(b.data())[i] = to_half(vb);
            break;
          case DType::bf16:
            reinterpret_cast<BFloat16*>(a.data())[i] = to_bfloat16(va);
            reinterpret_cast<BFloat16*>(b.data())[i] = to_bfloat16(vb);
            break;
          default:
            for (std::size_t k = 0; k < es; ++k) {
              a[i * es + k] = static_cast<std::uint8_t>(rng());
              b[i * es + k] = static_cast<std::uint8_t>(rng());
            }
        }
      }
      reduce_to_generic(x.data(), a.data(), b.data(), n, t, op);
      reduce_to_avx2(y.data(), a.data(), b.data(), n, t, op);
      ASSERT_EQ(x, y) << dtype_name(t) << " " << reduce_op_name(op);
    }
  }
  EXPECT_STREQ(reduce_kernel_name(), "avx2+f16c");
}
#endif

// The rank-ordered fold (every algorithm of MCI_REPRODUCIBLE, and the
// shared-memory ones): 16-bit floats accumulate every rank's value in f32
// and are rounded once, not once per rank. The reference below is that
// definition written out; per-rank rounding (reduce_into, as the ring
// does) gives other bits on some elements, so the test tells them apart.
template <class T>
void check_16bit_fold(DType t, T (*round)(float), float (*widen)(T)) {
  constexpr int kRanks = 5;
  constexpr std::size_t kCount = 3001;  // over two chunks of the kernel, and a tail
  std::mt19937 rng(11);
  std::vector<std::vector<T>> in(kRanks, std::vector<T>(kCount));
  for (auto& v : in) {
    for (auto& x : v) x = round(std::uniform_real_distribution<float>(-3, 3)(rng));
  }
  const auto src = [&](int r) -> const void* { return in[static_cast<std::size_t>(r)].data(); };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::max}) {
    std::vector<T> got(kCount), stepwise = in[0];
    fold_ranks(got.data(), src, kRanks, kCount, t, op);
    for (int r = 1; r < kRanks; ++r)
      reduce_into(stepwise.data(), in[static_cast<std::size_t>(r)].data(), kCount, t, op);
    if (op == ReduceOp::avg) finish_avg(stepwise.data(), kCount, t, kRanks);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      float acc = widen(in[0][i]);
      for (int r = 1; r < kRanks; ++r) {
        const float x = widen(in[static_cast<std::size_t>(r)][i]);
        acc = op == ReduceOp::prod ? acc * x : op == ReduceOp::max ? std::max(acc, x) : acc + x;
      }
      if (op == ReduceOp::avg) acc /= static_cast<float>(kRanks);
      ASSERT_EQ(std::bit_cast<std::uint16_t>(got[i]), std::bit_cast<std::uint16_t>(round(acc)))
          << dtype_name(t) << " " << reduce_op_name(op) << " element " << i;
      differ += std::bit_cast<std::uint16_t>(got[i]) != std::bit_cast<std::uint16_t>(stepwise[i]) ? 1 : 0;
    }
    if (op == ReduceOp::max) {
      EXPECT_EQ(differ, 0u) << "max rounds nothing";
    } else {
      EXPECT_GT(differ, 0u) << dtype_name(t) << " " << reduce_op_name(op) << ": one rounding is not one per rank";
    }
    // In place: the result over the first rank's own values.
    std::vector<std::vector<T>> again = in;
    fold_ranks(
        again[0].data(), [&](int r) -> const void* { return again[static_cast<std::size_t>(r)].data(); }, kRanks,
        kCount, t, op);
    EXPECT_EQ(std::memcmp(again[0].data(), got.data(), kCount * sizeof(T)), 0) << dtype_name(t);
#if defined(__x86_64__)
    if (std::string_view(reduce_kernel_name()) == "avx2+f16c") {
      std::vector<T> base(kCount), vec(kCount);
      fold_16bit_generic(base.data(), src, kRanks, kCount, t, op);
      fold_16bit_avx2(vec.data(), src, kRanks, kCount, t, op);
      EXPECT_EQ(std::memcmp(base.data(), vec.data(), kCount * sizeof(T)), 0) << "the two builds differ";
    }
#endif
  }
}

TEST(ReduceKernels, RankOrderedFoldRounds16BitFloatsOnce) {
  check_16bit_fold<Half>(DType::f16, to_half, to_float);
  check_16bit_fold<BFloat16>(DType::bf16, to_bfloat16, to_float);
}

TEST(ReduceKernels, RankOrderedFoldOfWiderTypesIsTheStepwiseFold) {
  std::mt19937 rng(5);
  std::vector<std::vector<float>> in(4, std::vector<float>(257));
  for (auto& v : in) {
    for (auto& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  }
  std::vector<float> got(257), want = in[0];
  fold_ranks(
      got.data(), [&](int r) -> const void* { return in[static_cast<std::size_t>(r)].data(); }, 4, 257, DType::f32,
      ReduceOp::avg);
  for (int r = 1; r < 4; ++r)
    reduce_into(want.data(), in[static_cast<std::size_t>(r)].data(), 257, DType::f32, ReduceOp::sum);
  finish_avg(want.data(), 257, DType::f32, 4);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace mci::coll
