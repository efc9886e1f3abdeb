#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "mci/types.hpp"

namespace mci {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i8), 1u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(reduce_op_name(ReduceOp::avg), "avg");
}

TEST(BufferView, ViewOfAVectorCarriesTypeAndCount) {
  std::vector<double> v(5);
  BufferView b = view(v);
  EXPECT_EQ(b.data, v.data());
  EXPECT_EQ(b.count, 5u);
  EXPECT_EQ(b.dtype, DType::f64);
  EXPECT_EQ(b.bytes(), 40u);
  EXPECT_EQ(view(v, Device::cuda(1)).device.str(), "cuda:1");
}

TEST(Half, EveryNonNanPatternSurvivesARoundTripThroughFloat) {
  for (unsigned bits = 0; bits < 65536; ++bits) {
    const Half h{static_cast<std::uint16_t>(bits)};
    const float f = to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(to_half(f))));
      continue;
    }
    ASSERT_EQ(to_half(f).bits, bits) << "bits " << bits << " float " << f;
  }
}

TEST(Half, KnownValuesAndRounding) {
  EXPECT_EQ(to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_half(1e6f).bits, 0x7c00);               // overflow to infinity
  EXPECT_EQ(to_half(5.960464477539063e-08f).bits, 1);  // smallest subnormal
  EXPECT_EQ(to_half(1e-9f).bits, 0);                   // underflow to zero
  // 1 + 2^-11 is halfway between 1 and the next half: ties go to even (1).
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  EXPECT_EQ(to_half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_FLOAT_EQ(to_float(Half{0x3555}), 0.333251953125f);
}

TEST(BFloat16, RoundTripAndRounding) {
  for (unsigned bits = 0; bits < 65536; ++bits) {
    const BFloat16 b{static_cast<std::uint16_t>(bits)};
    const float f = to_float(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_bfloat16(f).bits, bits);
  }
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway: ties to even stays at 1.0.
  EXPECT_EQ(to_bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace mci
