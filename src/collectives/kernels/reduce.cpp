#include "collectives/kernels/reduce.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace mci::coll {

void reduce_to_generic(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#if defined(__x86_64__)
void reduce_to_avx2(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#endif

namespace {

using Kernel = void (*)(void*, const void*, const void*, std::size_t, DType, ReduceOp);

// F16C is asked of cpuid directly: clang (14) rejects "f16c" in
// __builtin_cpu_supports, and the AVX2 check already covers OS support of
// the YMM state both extensions need.
bool has_avx2_f16c() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

// Chosen once per process from what this CPU supports; read-only after.
Kernel pick() {
#if defined(__x86_64__)
  if (has_avx2_f16c()) return reduce_to_avx2;
#endif
  return reduce_to_generic;
}

template <class T, class A>
void avg_typed(T* p, std::size_t n, int world, A (*load)(T), T (*store)(A)) {
  for (std::size_t i = 0; i < n; ++i) p[i] = store(static_cast<A>(load(p[i]) / static_cast<A>(world)));
}

template <class T>
T same(T v) {
  return v;
}

}  // namespace

void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType t, ReduceOp op) {
  static const Kernel kernel = pick();
  kernel(out, a, b, count, t, op);
}

void reduce_into(void* dst, const void* src, std::size_t count, DType t, ReduceOp op) {
  reduce_to(dst, dst, src, count, t, op);
}

void finish_avg(void* data, std::size_t count, DType t, int n) {
  switch (t) {
    case DType::f32: return avg_typed<float, float>(static_cast<float*>(data), count, n, same, same);
    case DType::f64: return avg_typed<double, double>(static_cast<double*>(data), count, n, same, same);
    case DType::f16: return avg_typed<Half, float>(static_cast<Half*>(data), count, n, to_float, to_half);
    case DType::bf16: return avg_typed<BFloat16, float>(static_cast<BFloat16*>(data), count, n, to_float, to_bfloat16);
    case DType::i8: return avg_typed<std::int8_t, std::int8_t>(static_cast<std::int8_t*>(data), count, n, same, same);
    case DType::u8:
      return avg_typed<std::uint8_t, std::uint8_t>(static_cast<std::uint8_t*>(data), count, n, same, same);
    case DType::i32:
      return avg_typed<std::int32_t, std::int32_t>(static_cast<std::int32_t*>(data), count, n, same, same);
    case DType::i64:
      return avg_typed<std::int64_t, std::int64_t>(static_cast<std::int64_t*>(data), count, n, same, same);
  }
}

void fold_ranks(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op) {
  if (count == 0) return;
  if (t == DType::f16 || t == DType::bf16) {
#if defined(__x86_64__)
    static const bool avx2 = has_avx2_f16c();
    if (avx2) return fold_16bit_avx2(dst, src, n, count, t, op);
#endif
    return fold_16bit_generic(dst, src, n, count, t, op);
  }
  const std::size_t bytes = count * dtype_size(t);
  if (n == 1) {
    if (dst != src(0)) std::memmove(dst, src(0), bytes);
    return;
  }
  reduce_to(dst, src(0), src(1), count, t, op);
  for (int r = 2; r < n; ++r) reduce_into(dst, src(r), count, t, op);
  if (op == ReduceOp::avg) finish_avg(dst, count, t, n);
}

// The kernel this process uses, for diagnostics and tests.
const char* reduce_kernel_name() { return has_avx2_f16c() ? "avx2+f16c" : "generic"; }

}  // namespace mci::coll
