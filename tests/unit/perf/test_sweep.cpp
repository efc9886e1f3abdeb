// The sizes a run measures, and byte counts with K/M/G suffixes.
#include <gtest/gtest.h>

#include "mci/errors.hpp"
#include "perf/sweep.hpp"

namespace mci::perf {
namespace {

using Sizes = std::vector<std::size_t>;

TEST(PerfSweep, ByteCountsWithSuffixes) {
  EXPECT_EQ(parse_bytes("0", "-b"), 0u);
  EXPECT_EQ(parse_bytes("8", "-b"), 8u);
  EXPECT_EQ(parse_bytes("64K", "-b"), 64u << 10);
  EXPECT_EQ(parse_bytes("64k", "-b"), 64u << 10);
  EXPECT_EQ(parse_bytes("1M", "-b"), 1u << 20);
  EXPECT_EQ(parse_bytes("1MB", "-b"), 1u << 20);
  EXPECT_EQ(parse_bytes("2G", "-b"), std::size_t{2} << 30);
  EXPECT_EQ(parse_bytes("128B", "-b"), 128u);
  EXPECT_THROW(parse_bytes("", "-b"), UsageError);
  EXPECT_THROW(parse_bytes("M", "-b"), UsageError);
  EXPECT_THROW(parse_bytes("1.5M", "-b"), UsageError);
  EXPECT_THROW(parse_bytes("-8", "-b"), UsageError);
  EXPECT_THROW(parse_bytes("99999999999999999999", "-b"), UsageError);
  EXPECT_THROW(parse_bytes("99999999999G", "-b"), UsageError);
}

TEST(PerfSweep, BytesTextIsTheShortestExactForm) {
  EXPECT_EQ(bytes_text(8), "8");
  EXPECT_EQ(bytes_text(1000), "1000");
  EXPECT_EQ(bytes_text(1024), "1K");
  EXPECT_EQ(bytes_text(3u << 20), "3M");
}

TEST(PerfSweep, GeometricStepsStopAtTheLargestSizeNotAbove) {
  EXPECT_EQ(size_sweep({8, 128, 2, 0}), (Sizes{8, 16, 32, 64, 128}));
  EXPECT_EQ(size_sweep({8, 1 << 20, 4, 0}), (Sizes{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288}));
  EXPECT_EQ(size_sweep({8, 100, 2, 0}), (Sizes{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep({64, 64, 2, 0}), (Sizes{64}));
}

TEST(PerfSweep, LinearStepsWhenStepBytesIsGiven) {
  EXPECT_EQ(size_sweep({1024, 4096, 2, 1024}), (Sizes{1024, 2048, 3072, 4096}));
  EXPECT_EQ(size_sweep({0, 24, 2, 8}), (Sizes{0, 8, 16, 24}));
  EXPECT_EQ(size_sweep({8, 30, 2, 8}), (Sizes{8, 16, 24}));
}

TEST(PerfSweep, ZeroBytesAloneIsAValidSweep) { EXPECT_EQ(size_sweep({0, 0, 2, 0}), (Sizes{0})); }

TEST(PerfSweep, NoOverflowNearTheTopOfSizeT) {
  const std::size_t top = std::numeric_limits<std::size_t>::max();
  const auto s = size_sweep({top / 2 + 1, top, 2, 0});
  EXPECT_EQ(s, (Sizes{top / 2 + 1}));
  const auto l = size_sweep({top - 10, top, 2, 8});
  EXPECT_EQ(l, (Sizes{top - 10, top - 2}));
}

TEST(PerfSweep, SweepsThatCannotRunAreRefused) {
  EXPECT_THROW(size_sweep({16, 8, 2, 0}), UsageError);
  EXPECT_THROW(size_sweep({8, 64, 1, 0}), UsageError);
  EXPECT_THROW(size_sweep({0, 64, 2, 0}), UsageError);
  EXPECT_THROW(size_sweep({8, std::size_t{1} << 40, 2, 8}), UsageError);  // billions of sizes
}

}  // namespace
}  // namespace mci::perf
