#include "collectives/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mci::coll {

namespace {

template <class T>
struct Native {
  static T load(T v) { return v; }
  static T store(T v) { return v; }
  using Acc = T;
};
template <>
struct Native<Half> {
  using Acc = float;
  static float load(Half v) { return to_float(v); }
  static Half store(float v) { return to_half(v); }
};
template <>
struct Native<BFloat16> {
  using Acc = float;
  static float load(BFloat16 v) { return to_float(v); }
  static BFloat16 store(float v) { return to_bfloat16(v); }
};

// Integer sums and products wrap around (as in NCCL) instead of overflowing
// signed types, which C++ leaves undefined.
template <class A>
A add(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <class A>
A mul(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<A>(static_cast<U>(static_cast<W>(static_cast<U>(x)) * static_cast<W>(static_cast<U>(y))));
  } else {
    return x * y;
  }
}

template <class T, class F>
void apply(T* out, const T* a, const T* b, std::size_t n, F f) {
  using N = Native<T>;
  for (std::size_t i = 0; i < n; ++i) out[i] = N::store(f(N::load(a[i]), N::load(b[i])));
}

template <class T>
void reduce_typed(T* out, const T* a, const T* b, std::size_t n, ReduceOp op) {
  using A = typename Native<T>::Acc;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      apply(out, a, b, n, [](A x, A y) { return add(x, y); });
      break;
    case ReduceOp::prod:
      apply(out, a, b, n, [](A x, A y) { return mul(x, y); });
      break;
    case ReduceOp::min:
      apply(out, a, b, n, [](A x, A y) { return std::min(x, y); });
      break;
    case ReduceOp::max:
      apply(out, a, b, n, [](A x, A y) { return std::max(x, y); });
      break;
  }
}

template <class T>
void avg_typed(T* p, std::size_t n, int world) {
  using N = Native<T>;
  using A = typename Native<T>::Acc;
  for (std::size_t i = 0; i < n; ++i) p[i] = N::store(static_cast<A>(N::load(p[i]) / static_cast<A>(world)));
}

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::f16: f(Half{}); break;
    case DType::bf16: f(BFloat16{}); break;
    case DType::i8: f(std::int8_t{}); break;
    case DType::u8: f(std::uint8_t{}); break;
    case DType::i32: f(std::int32_t{}); break;
    case DType::i64: f(std::int64_t{}); break;
  }
}

}  // namespace

void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType t, ReduceOp op) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    reduce_typed(static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), count, op);
  });
}

void reduce_into(void* dst, const void* src, std::size_t count, DType t, ReduceOp op) {
  reduce_to(dst, dst, src, count, t, op);
}

void finish_avg(void* data, std::size_t count, DType t, int n) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    avg_typed(static_cast<T*>(data), count, n);
  });
}

}  // namespace mci::coll
