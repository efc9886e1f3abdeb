// Data frames between ranks: a fixed 48-byte header, then the payload. The
// header carries the operation's fingerprint so a receiver checks, for free,
// that the sender is in the same collective with the same shape.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/fingerprint.hpp"

namespace mci::transport {

enum class FrameType : std::uint8_t {
  data = 1,   // payload for a collective or a point-to-point op
  bye = 2,    // the sender closes the group normally
  abort = 3,  // the sender aborts the group; payload is the reason (text)
};

inline constexpr std::size_t kFrameHeaderSize = 48;
inline constexpr std::uint64_t kMaxAbortReason = 64 * 1024;

struct FrameHeader {
  FrameType type = FrameType::data;
  Fingerprint fp;
  std::uint64_t payload = 0;  // bytes following the header
  // The latest arrival into this operation the sender knows of (wall clock
  // ns, and which rank), so every rank learns who came last for free.
  std::int64_t latest_ns = 0;
  std::int32_t latest_rank = -1;
};

inline constexpr std::int32_t kMaxRankInFrame = (1 << 24) - 2;

void encode(const FrameHeader& h, std::span<std::uint8_t, kFrameHeaderSize> out);
// nullopt when the bytes cannot be a header (bad magic, unknown type, op or
// dtype, abort reason too long).
std::optional<FrameHeader> decode(std::span<const std::uint8_t, kFrameHeaderSize> in);

}  // namespace mci::transport
