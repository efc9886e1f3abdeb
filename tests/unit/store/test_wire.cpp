#include <gtest/gtest.h>

#include <random>

#include "store/wire.hpp"

namespace mci::store {
namespace {

std::span<const std::uint8_t, kHeaderSize> header(const StoreValue& f) {
  return std::span<const std::uint8_t, kHeaderSize>(f.data(), kHeaderSize);
}

TEST(Wire, RequestsRoundTrip) {
  Request r;
  r.op = Op::compare_set;
  r.keys = {"key/1"};
  r.value = to_bytes("old");
  r.value2 = to_bytes("new");
  StoreValue f;
  encode(r, f);
  auto len = body_length(header(f));
  ASSERT_TRUE(len);
  ASSERT_EQ(*len + kHeaderSize, f.size());
  auto back = decode_request(std::span<const std::uint8_t>(f.data() + kHeaderSize, *len));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->op, Op::compare_set);
  EXPECT_EQ(back->keys, r.keys);
  EXPECT_EQ(back->value, r.value);
  EXPECT_EQ(back->value2, r.value2);

  Request w;
  w.op = Op::wait;
  w.keys = {"a", "b", "c"};
  w.num = 1234;
  StoreValue g;
  encode(w, g);
  auto wb = decode_request(std::span<const std::uint8_t>(g.data() + kHeaderSize, g.size() - kHeaderSize));
  ASSERT_TRUE(wb);
  EXPECT_EQ(wb->keys, w.keys);
  EXPECT_EQ(wb->num, 1234);
}

TEST(Wire, BadMagicOversizedAndEmptyBodiesAreRejected) {
  StoreValue f = {'X', 'X', 'X', 'X', 1, 0, 0, 0};
  EXPECT_FALSE(body_length(header(f)));
  Request r;
  r.op = Op::num_keys;
  StoreValue g;
  encode(r, g);
  g[4] = 0xff;
  g[5] = 0xff;
  g[6] = 0xff;
  g[7] = 0x7f;  // 2 GiB body
  EXPECT_FALSE(body_length(header(g)));
  g[4] = g[5] = g[6] = g[7] = 0;
  EXPECT_FALSE(body_length(header(g)));
}

TEST(Wire, TruncatedTrailingAndForgedLengthsAreRejected) {
  Request r;
  r.op = Op::set;
  r.keys = {"k"};
  r.value = to_bytes("value");
  StoreValue f;
  encode(r, f);
  std::span<const std::uint8_t> body(f.data() + kHeaderSize, f.size() - kHeaderSize);
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    EXPECT_FALSE(decode_request(body.first(cut))) << "cut " << cut;
  }
  StoreValue longer(body.begin(), body.end());
  longer.push_back(0);
  EXPECT_FALSE(decode_request(longer));
  StoreValue forged(body.begin(), body.end());
  forged[1] = 0xff;  // key length 255 with 1 byte present
  EXPECT_FALSE(decode_request(forged));
  StoreValue bad_op(body.begin(), body.end());
  bad_op[0] = 200;
  EXPECT_FALSE(decode_request(bad_op));
}

TEST(Wire, RandomBytesNeverCrashTheDecoder) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    StoreValue b(rng() % 64);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    if (!b.empty() && i % 2) b[0] = static_cast<std::uint8_t>(rng() % 12);
    (void)decode_request(b);
    (void)decode_response(b);
  }
  SUCCEED();
}

}  // namespace
}  // namespace mci::store
