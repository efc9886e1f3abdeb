// The reduction loops, written once and compiled twice: for the baseline
// x86-64 instruction set and for AVX2+F16C (reduce_avx2.cpp); the
// dispatcher in reduce.cpp picks one at run time. Both compile with
// -ffp-contract=off and perform the same IEEE operations in the same order,
// so every rank gets the same bits whatever CPU it runs on.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "mci/types.hpp"

#if defined(MCI_KERNELS_AVX2)
#include <immintrin.h>
#endif

namespace mci::coll::MCI_KERNEL_NS {

// Inline 16-bit conversions (so the loops vectorise); same rounding as
// mci::to_half / to_bfloat16: nearest even.
inline float bf16_load(BFloat16 b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16); }
inline BFloat16 bf16_store(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(nan ? ((x >> 16) | 0x40u) : (rounded >> 16))};
}

template <class A>
inline A add(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <class A>
inline A mul(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<A>(static_cast<U>(static_cast<W>(static_cast<U>(x)) * static_cast<W>(static_cast<U>(y))));
  } else {
    return x * y;
  }
}
template <class A>
inline A min_of(A x, A y) {
  return y < x ? y : x;
}
template <class A>
inline A max_of(A x, A y) {
  return x < y ? y : x;
}

template <class T, class F>
inline void loop(T* out, const T* a, const T* b, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <class F>
inline void loop_bf16(BFloat16* out, const BFloat16* a, const BFloat16* b, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_store(f(bf16_load(a[i]), bf16_load(b[i])));
}

template <class F>
inline void loop_f16(Half* out, const Half* a, const Half* b, std::size_t n, F f) {
  std::size_t i = 0;
#if defined(MCI_KERNELS_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    alignas(32) float xs[8], ys[8];
    _mm256_store_ps(xs, x);
    _mm256_store_ps(ys, y);
    for (int k = 0; k < 8; ++k) xs[k] = f(xs[k], ys[k]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_load_ps(xs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) out[i] = to_half(f(to_float(a[i]), to_float(b[i])));
}

template <class T>
inline void reduce_typed(T* out, const T* a, const T* b, std::size_t n, ReduceOp op) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    auto run = [&](auto f) {
      if constexpr (std::is_same_v<T, Half>) {
        loop_f16(out, a, b, n, f);
      } else {
        loop_bf16(out, a, b, n, f);
      }
    };
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return run([](float x, float y) { return x + y; });
      case ReduceOp::prod: return run([](float x, float y) { return x * y; });
      case ReduceOp::min: return run([](float x, float y) { return min_of(x, y); });
      case ReduceOp::max: return run([](float x, float y) { return max_of(x, y); });
    }
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return loop(out, a, b, n, [](T x, T y) { return add(x, y); });
      case ReduceOp::prod: return loop(out, a, b, n, [](T x, T y) { return mul(x, y); });
      case ReduceOp::min: return loop(out, a, b, n, [](T x, T y) { return min_of(x, y); });
      case ReduceOp::max: return loop(out, a, b, n, [](T x, T y) { return max_of(x, y); });
    }
  }
}

// The untyped buffers as T.
template <class T>
inline void reduce_as(void* out, const void* a, const void* b, std::size_t n, ReduceOp op) {
  reduce_typed(static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
}

inline void reduce_to(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::f32: return reduce_as<float>(out, a, b, n, op);
    case DType::f64: return reduce_as<double>(out, a, b, n, op);
    case DType::f16: return reduce_as<Half>(out, a, b, n, op);
    case DType::bf16: return reduce_as<BFloat16>(out, a, b, n, op);
    case DType::i8: return reduce_as<std::int8_t>(out, a, b, n, op);
    case DType::u8: return reduce_as<std::uint8_t>(out, a, b, n, op);
    case DType::i32: return reduce_as<std::int32_t>(out, a, b, n, op);
    case DType::i64: return reduce_as<std::int64_t>(out, a, b, n, op);
  }
}

// 16-bit floats folded in rank order with one rounding: each element's n
// values widened to f32, combined in f32 in rank order (divided by n in
// f32 for avg), rounded to T once. Chunked, so that the f32 accumulator
// stays in L1; a chunk's sources are all read before its result is
// written, so dst may be any one of the sources.
template <class T>
inline void widen(float* out, const T* in, std::size_t n) {
  std::size_t i = 0;
  if constexpr (std::is_same_v<T, Half>) {
#if defined(MCI_KERNELS_AVX2)
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    }
#endif
    for (; i < n; ++i) out[i] = to_float(in[i]);
  } else {
    for (; i < n; ++i) out[i] = bf16_load(in[i]);
  }
}

template <class T>
inline void narrow(T* out, const float* in, std::size_t n) {
  std::size_t i = 0;
  if constexpr (std::is_same_v<T, Half>) {
#if defined(MCI_KERNELS_AVX2)
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#endif
    for (; i < n; ++i) out[i] = to_half(in[i]);
  } else {
    for (; i < n; ++i) out[i] = bf16_store(in[i]);
  }
}

template <class T, class Sources>
inline void fold16(T* dst, const Sources& src, int n, std::size_t count, ReduceOp op) {
  constexpr std::size_t kChunk = 1024;
  alignas(32) float acc[kChunk];
  alignas(32) float x[kChunk];
  for (std::size_t at = 0; at < count; at += kChunk) {
    const std::size_t len = std::min(kChunk, count - at);
    widen(acc, static_cast<const T*>(src(0)) + at, len);
    for (int r = 1; r < n; ++r) {
      widen(x, static_cast<const T*>(src(r)) + at, len);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          for (std::size_t i = 0; i < len; ++i) acc[i] = acc[i] + x[i];
          break;
        case ReduceOp::prod:
          for (std::size_t i = 0; i < len; ++i) acc[i] = acc[i] * x[i];
          break;
        case ReduceOp::min:
          for (std::size_t i = 0; i < len; ++i) acc[i] = min_of(acc[i], x[i]);
          break;
        case ReduceOp::max:
          for (std::size_t i = 0; i < len; ++i) acc[i] = max_of(acc[i], x[i]);
          break;
      }
    }
    if (op == ReduceOp::avg) {
      const float world = static_cast<float>(n);
      for (std::size_t i = 0; i < len; ++i) acc[i] = acc[i] / world;
    }
    narrow(dst + at, acc, len);
  }
}

template <class Sources>
inline void fold_16bit(void* dst, const Sources& src, int n, std::size_t count, DType t, ReduceOp op) {
  if (t == DType::f16) {
    fold16(static_cast<Half*>(dst), src, n, count, op);
  } else {
    fold16(static_cast<BFloat16*>(dst), src, n, count, op);
  }
}

}  // namespace mci::coll::MCI_KERNEL_NS
