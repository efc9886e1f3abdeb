#include "perf/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace mci::perf {

namespace {

// splitmix64's finaliser: every bit of the input moves every bit of the output.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double tolerance(DType t) {
  switch (t) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-6;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;
  }
}

bool same(DType t, double got, double want) {
  if (got == want) return true;
  if (!is_floating(t) || std::isnan(got)) return false;
  // Relative only: an expected 0 (a sum of integers) must be exactly 0.
  return std::fabs(got - want) <= tolerance(t) * std::fabs(want);
}

}  // namespace

void put_value(DType t, void* base, std::size_t i, double v) { store_element(t, base, i, v); }

double get_value(DType t, const void* base, std::size_t i) { return load_element(t, base, i); }

double input_value(DType t, int key, int round, std::size_t i, bool narrow) {
  const std::uint64_t h = mix(mix(mix(static_cast<std::uint64_t>(key)) ^ static_cast<std::uint64_t>(round)) ^
                              static_cast<std::uint64_t>(i % kPeriod));
  const auto mixed = narrow ? static_cast<long long>(h % 5) - 2 : static_cast<long long>(h % 11) - 5;
  std::uint8_t cell[8];
  put_value(t, cell, 0, static_cast<double>(mixed));
  return get_value(t, cell, 0);
}

double reduced_value(DType t, ReduceOp op, int ranks, int round, std::size_t i, bool narrow) {
  double acc = input_value(t, 0, round, i, narrow);
  for (int r = 1; r < ranks; ++r) {
    const double v = input_value(t, r, round, i, narrow);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  // Integer results wrap like the type (wrapping once at the end equals
  // wrapping at every step, and the exact values stay far below 2^53).
  std::uint8_t cell[8];
  put_value(t, cell, 0, acc);
  acc = get_value(t, cell, 0);
  if (op != ReduceOp::avg) return acc;
  switch (t) {
    case DType::f64: return acc / ranks;
    case DType::f32:
    case DType::f16:
    case DType::bf16: return static_cast<float>(acc) / static_cast<float>(ranks);
    default: return std::trunc(acc / ranks);
  }
}

void fill_values(DType t, void* base, std::size_t count, const ValueFn& f) {
  const std::size_t es = dtype_size(t);
  auto* bytes = static_cast<std::uint8_t*>(base);
  const std::size_t head = std::min(count, kPeriod);
  for (std::size_t i = 0; i < head; ++i) put_value(t, bytes, i, f(i));
  // Doubling copies: the filled prefix is always a whole number of periods.
  for (std::size_t done = head; done < count;) {
    const std::size_t n = std::min(done, count - done);
    std::memcpy(bytes + done * es, bytes, n * es);
    done += n;
  }
}

std::uint64_t count_wrong(DType t, const void* got, std::size_t count, const ValueFn& f) {
  if (count == 0) return 0;
  const std::size_t es = dtype_size(t);
  const std::size_t period = std::min(count, kPeriod);
  std::vector<std::uint8_t> want(period * es);
  for (std::size_t i = 0; i < period; ++i) put_value(t, want.data(), i, f(i));
  const auto* g = static_cast<const std::uint8_t*>(got);
  std::uint64_t wrong = 0;
  for (std::size_t start = 0; start < count; start += period) {
    const std::size_t len = std::min(period, count - start);
    const std::uint8_t* chunk = g + start * es;
    if (std::memcmp(chunk, want.data(), len * es) == 0) continue;
    for (std::size_t j = 0; j < len; ++j) {
      if (!same(t, get_value(t, chunk, j), get_value(t, want.data(), j))) ++wrong;
    }
  }
  return wrong;
}

void fill_sentinel(void* base, std::size_t bytes) { std::memset(base, 0xA5, bytes); }

}  // namespace mci::perf
