#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
}  // namespace mci::coll
