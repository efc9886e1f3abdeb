#include "collectives/kernels/copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace mci::coll {

void copy_to_shared(void* dst, const void* src, std::size_t n) {
  if (n == 0) return;  // src may be null then (an empty vector's data())
#if defined(__x86_64__)
  if (n >= kStreamingThreshold) {
    auto* d = static_cast<std::uint8_t*>(dst);
    const auto* s = static_cast<const std::uint8_t*>(src);
    // Align the destination to 16 bytes with a plain copy of the head.
    const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

void SharedCopier::timed_plain(void* dst, const void* src, std::size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  std::memcpy(dst, src, n);
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const double rate = static_cast<double>(n) / std::max(ns, 1.0);
  // Memory of about ten copies: one copy slowed by a page fault (first
  // touch of the segment) or by preemption must not flip the choice, while a
  // host that turned slow (its state flips within seconds) does within ten.
  // The first copies into each of the segment's buffers also take its page
  // faults: they say nothing about the cache.
  if (++samples_ <= kWarmupCopies) return;
  plain_rate_ = samples_ == kWarmupCopies + 1 ? rate : 0.9 * plain_rate_ + 0.1 * rate;
  streaming_ = plain_rate_ < slow_rate_;
}

void SharedCopier::copy(void* dst, const void* src, std::size_t n) {
  if (n < kStreamingThreshold || mode_ == Mode::plain) {
    if (n) std::memcpy(dst, src, n);
    return;
  }
  if (mode_ == Mode::streaming) {
    copy_to_shared(dst, src, n);
    return;
  }
  if (!streaming_ || ++since_probe_ >= kProbeEvery) {
    since_probe_ = 0;
    timed_plain(dst, src, n);
    return;
  }
  copy_to_shared(dst, src, n);
}

}  // namespace mci::coll
