// Whether two byte ranges share a byte: how validation refuses overlapping
// buffers and how the algorithms that accept them decide to copy aside.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mci {

inline bool ranges_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace mci
