// Element types, devices, reduction operators and the non-owning buffer view
// every collective takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace mci {

enum class DType : std::uint8_t { f32 = 0, f64, f16, bf16, i8, u8, i32, i64 };
inline constexpr int kNumDTypes = 8;

// Inline: every call asks it several times (buffer sizes, validation).
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}
std::string_view dtype_name(DType t) noexcept;
bool is_floating(DType t) noexcept;

enum class ReduceOp : std::uint8_t { sum = 0, avg, prod, min, max };
std::string_view reduce_op_name(ReduceOp op) noexcept;

// A device is the host or one CUDA device; index is only meaningful for cuda.
struct Device {
  enum class Kind : std::uint8_t { cpu = 0, cuda = 1 };
  Kind kind = Kind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int i) { return {Kind::cuda, i}; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// 16-bit floating types as storage only: mci reduces them in f32.
struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

template <class T>
struct dtype_of;
// One line a type (kept as written):
// clang-format off
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
// clang-format on

// Pointer + element count + type + device. The caller owns the memory and
// keeps it alive until the collective's Work has completed.
struct BufferView {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();

  std::size_t bytes() const noexcept { return count * dtype_size(dtype); }
  bool empty() const noexcept { return count == 0; }
};

template <class T>
BufferView view(std::span<T> s, Device d = Device::cpu()) {
  using U = std::remove_const_t<T>;
  return BufferView{const_cast<U*>(s.data()), s.size(), dtype_of<U>::value, d};
}

// Any contiguous container: std::vector, std::array, a C array.
template <class C>
requires requires(C& c) { std::span(c); }
BufferView view(C& c, Device d = Device::cpu()) { return view(std::span(c), d); }

template <class T>
BufferView view(T* p, std::size_t n, Device d = Device::cpu()) {
  return view(std::span<T>(p, n), d);
}

// Element i of host memory holding `t`, as a double; and the reverse, where
// integers wrap around like their type and 16-bit floats round to nearest
// even. Handy for generic code over BufferView (tests, checkers, printing).
double load_element(DType t, const void* base, std::size_t i) noexcept;
void store_element(DType t, void* base, std::size_t i, double v) noexcept;

// Conversions for the 16-bit types (round to nearest even).
float to_float(Half h) noexcept;
float to_float(BFloat16 b) noexcept;
Half to_half(float f) noexcept;
BFloat16 to_bfloat16(float f) noexcept;

}  // namespace mci
