#include <gtest/gtest.h>

#include <random>

#include "transport/frame.hpp"

namespace mci::transport {
namespace {

TEST(Frame, HeaderRoundTrips) {
  FrameHeader h;
  h.type = FrameType::data;
  h.fp.kind = OpKind::reduce_scatter;
  h.fp.seq = 123456789;
  h.fp.count = 1ull << 40;
  h.fp.root = 3;
  h.fp.dtype = DType::bf16;
  h.fp.op = ReduceOp::max;
  h.fp.algo = 2;
  h.payload = 4096;
  std::array<std::uint8_t, kFrameHeaderSize> buf{};
  encode(h, buf);
  auto back = decode(buf);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->fp.matches(h.fp));
  EXPECT_EQ(back->fp.seq, h.fp.seq);
  EXPECT_EQ(back->payload, 4096u);
  EXPECT_EQ(back->type, FrameType::data);
}

TEST(Frame, GarbageIsRejected) {
  std::array<std::uint8_t, kFrameHeaderSize> buf{};
  EXPECT_FALSE(decode(buf));
  FrameHeader h;
  encode(h, buf);
  auto bad = buf;
  bad[4] = 9;  // unknown type
  EXPECT_FALSE(decode(bad));
  bad = buf;
  bad[6] = 40;  // unknown dtype
  EXPECT_FALSE(decode(bad));
  h.type = FrameType::abort;
  h.payload = kMaxAbortReason + 1;
  encode(h, buf);
  EXPECT_FALSE(decode(buf));
  std::mt19937 rng(1);
  for (int i = 0; i < 50000; ++i) {
    for (auto& b : bad) b = static_cast<std::uint8_t>(rng());
    (void)decode(bad);
  }
}

}  // namespace
}  // namespace mci::transport
