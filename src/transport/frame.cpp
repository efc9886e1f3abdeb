#include "transport/frame.hpp"

#include <cstring>

namespace mci::transport {

namespace {
constexpr std::uint32_t kMagic = 0x4449434du;  // "MCID"

template <class T>
void put(std::uint8_t* p, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    p[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i));
  }
}

template <class T>
T get(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}
}  // namespace

// Layout: magic u32 | type u8 | kind u8 | dtype u8 | op u8 | algo u8 |
//         latest_rank+1 u24 | root i32 | pad 4 | latest_ns i64 | seq u64 |
//         count u64 | payload u64
void encode(const FrameHeader& h, std::span<std::uint8_t, kFrameHeaderSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kFrameHeaderSize);
  put<std::uint32_t>(p + 0, kMagic);
  p[4] = static_cast<std::uint8_t>(h.type);
  p[5] = static_cast<std::uint8_t>(h.fp.kind);
  p[6] = static_cast<std::uint8_t>(h.fp.dtype);
  p[7] = static_cast<std::uint8_t>(h.fp.op);
  p[8] = static_cast<std::uint8_t>(h.fp.algo);
  const auto lr =
      static_cast<std::uint32_t>(h.latest_rank < 0 || h.latest_rank > kMaxRankInFrame ? 0 : h.latest_rank + 1);
  p[9] = static_cast<std::uint8_t>(lr);
  p[10] = static_cast<std::uint8_t>(lr >> 8);
  p[11] = static_cast<std::uint8_t>(lr >> 16);
  put<std::uint32_t>(p + 12, static_cast<std::uint32_t>(h.fp.root));
  put<std::uint64_t>(p + 16, static_cast<std::uint64_t>(h.latest_ns));
  put<std::uint64_t>(p + 24, h.fp.seq);
  put<std::uint64_t>(p + 32, h.fp.count);
  put<std::uint64_t>(p + 40, h.payload);
}

std::optional<FrameHeader> decode(std::span<const std::uint8_t, kFrameHeaderSize> in) {
  const std::uint8_t* p = in.data();
  if (get<std::uint32_t>(p) != kMagic) return std::nullopt;
  FrameHeader h;
  if (p[4] < 1 || p[4] > 3) return std::nullopt;
  h.type = static_cast<FrameType>(p[4]);
  if (p[5] >= kOpKindCount) return std::nullopt;
  if (p[6] > static_cast<std::uint8_t>(DType::i64)) return std::nullopt;
  if (p[7] > static_cast<std::uint8_t>(ReduceOp::max)) return std::nullopt;
  h.fp.kind = static_cast<OpKind>(p[5]);
  h.fp.dtype = static_cast<DType>(p[6]);
  h.fp.op = static_cast<ReduceOp>(p[7]);
  h.fp.algo = p[8];
  h.fp.root = static_cast<std::int32_t>(get<std::uint32_t>(p + 12));
  h.latest_rank = static_cast<std::int32_t>(p[9] | p[10] << 8 | p[11] << 16) - 1;
  h.latest_ns = static_cast<std::int64_t>(get<std::uint64_t>(p + 16));
  h.fp.seq = get<std::uint64_t>(p + 24);
  h.fp.count = get<std::uint64_t>(p + 32);
  h.payload = get<std::uint64_t>(p + 40);
  if (h.type == FrameType::abort && h.payload > kMaxAbortReason) return std::nullopt;
  if (h.type == FrameType::bye && h.payload != 0) return std::nullopt;
  return h;
}

}  // namespace mci::transport
