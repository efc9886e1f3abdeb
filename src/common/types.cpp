#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "mci/types.hpp"

namespace mci {

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

bool is_floating(DType t) noexcept { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
  }
  return "?";
}

std::string Device::str() const { return is_cuda() ? "cuda:" + std::to_string(index) : std::string("cpu"); }

float to_float(Half h) noexcept {
  const std::uint32_t sign = (h.bits & 0x8000u) << 16;
  std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t man = h.bits & 0x3ffu;
  std::uint32_t out;
  if (exp == 0) {
    if (man == 0) {
      out = sign;
    } else {  // subnormal half: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      out = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (man << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(out);
}

Half to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    const std::uint16_t nan = absx > 0x7f800000u ? 0x200u : 0u;
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u | nan)};
  }
  if (absx >= 0x477ff000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (absx < 0x38800000u) {                                                          // subnormal or zero in half
    if (absx < 0x33000000u) return Half{sign};
    const std::uint32_t e = absx >> 23;
    const std::uint32_t man = (absx & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // value / 2^-24 = man >> shift
    const std::uint32_t rem = man & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t r = man >> shift;
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return Half{static_cast<std::uint16_t>(sign | r)};
  }
  std::uint32_t r = ((absx >> 13) - ((127 - 15) << 10));
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return Half{static_cast<std::uint16_t>(sign | r)};
}

float to_float(BFloat16 b) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16); }

BFloat16 to_bfloat16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(x >> 16)};
}

namespace {
template <class T>
T wrap(double v) {
  return static_cast<T>(static_cast<std::int64_t>(v));
}
}  // namespace

void store_element(DType t, void* base, std::size_t i, double v) noexcept {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(base)[i] = v; break;
    case DType::f16: static_cast<Half*>(base)[i] = to_half(static_cast<float>(v)); break;
    case DType::bf16: static_cast<BFloat16*>(base)[i] = to_bfloat16(static_cast<float>(v)); break;
    case DType::i8: static_cast<std::int8_t*>(base)[i] = wrap<std::int8_t>(v); break;
    case DType::u8: static_cast<std::uint8_t*>(base)[i] = wrap<std::uint8_t>(v); break;
    case DType::i32: static_cast<std::int32_t*>(base)[i] = wrap<std::int32_t>(v); break;
    case DType::i64: static_cast<std::int64_t*>(base)[i] = wrap<std::int64_t>(v); break;
  }
}

double load_element(DType t, const void* base, std::size_t i) noexcept {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f64: return static_cast<const double*>(base)[i];
    case DType::f16: return to_float(static_cast<const Half*>(base)[i]);
    case DType::bf16: return to_float(static_cast<const BFloat16*>(base)[i]);
    case DType::i8: return static_cast<const std::int8_t*>(base)[i];
    case DType::u8: return static_cast<const std::uint8_t*>(base)[i];
    case DType::i32: return static_cast<const std::int32_t*>(base)[i];
    case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
  }
  return 0;
}

}  // namespace mci
