#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

#include "collectives/kernels/copy.hpp"

namespace mci::coll {
namespace {

// Every size around the streaming threshold and the 64-byte loop, at odd
// destination alignments: the bytes arrive exactly, none beyond n.
void expect_exact(const std::function<void(void*, const void*, std::size_t)>& copy) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, kStreamingThreshold - 1,
                        kStreamingThreshold, kStreamingThreshold + 65, std::size_t{1} << 20}) {
    for (std::size_t shift : {0, 1, 7, 15}) {
      std::vector<std::uint8_t> src(n), dst(n + shift + 16, 0xAB);
      std::iota(src.begin(), src.end(), static_cast<std::uint8_t>(n));
      copy(dst.data() + shift, src.data(), n);
      for (std::size_t i = 0; i < shift; ++i) ASSERT_EQ(dst[i], 0xAB);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(dst[shift + i], src[i]) << "n=" << n << " at " << i;
      for (std::size_t i = shift + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "n=" << n;
    }
  }
}

TEST(CopyKernels, StreamingCopyIsExact) { expect_exact(copy_to_shared); }

TEST(CopyKernels, SharedCopierIsExactInBothModes) {
  SharedCopier plain(0.0), streaming(1e300);
  expect_exact([&](void* d, const void* s, std::size_t n) { plain.copy(d, s, n); });
  expect_exact([&](void* d, const void* s, std::size_t n) { streaming.copy(d, s, n); });
  SharedCopier forced(0.0, SharedCopier::Mode::streaming);
  expect_exact([&](void* d, const void* s, std::size_t n) { forced.copy(d, s, n); });
  EXPECT_FALSE(plain.streaming());
  EXPECT_TRUE(streaming.streaming());
}

TEST(CopyKernels, SharedCopierStreamsOnlyWhilePlainCopiesAreSlow) {
  std::vector<std::uint8_t> src(1 << 20, 1), dst(1 << 20);
  SharedCopier never(0.0);  // no plain copy is ever slow
  for (int i = 0; i < 100; ++i) never.copy(dst.data(), src.data(), src.size());
  EXPECT_FALSE(never.streaming());
  SharedCopier always(1e300);  // every plain copy is slow
  for (std::uint64_t i = 0; i < SharedCopier::kWarmupCopies; ++i) {
    always.copy(dst.data(), src.data(), src.size());
    EXPECT_FALSE(always.streaming()) << "the first copies pay page faults and are not counted";
  }
  always.copy(dst.data(), src.data(), src.size());
  EXPECT_TRUE(always.streaming());
  // While streaming, every kProbeEvery-th copy is plain and timed: still slow.
  for (std::uint32_t i = 0; i < 2 * SharedCopier::kProbeEvery; ++i) always.copy(dst.data(), src.data(), src.size());
  EXPECT_TRUE(always.streaming());
  // Forced modes never switch.
  SharedCopier forced_plain(1e300, SharedCopier::Mode::plain), forced_streaming(0.0, SharedCopier::Mode::streaming);
  for (int i = 0; i < 100; ++i) {
    forced_plain.copy(dst.data(), src.data(), src.size());
    forced_streaming.copy(dst.data(), src.data(), src.size());
  }
  EXPECT_FALSE(forced_plain.streaming());
  EXPECT_TRUE(forced_streaming.streaming());
  // Small copies are never timed, so they change nothing.
  SharedCopier small(1e300);
  small.copy(dst.data(), src.data(), kStreamingThreshold - 1);
  EXPECT_FALSE(small.streaming());
}

}  // namespace
}  // namespace mci::coll
