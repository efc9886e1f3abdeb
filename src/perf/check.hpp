// Data for checked iterations: what every rank puts in, and what every
// output element must be, computed locally on each rank (no extra
// communication). Values are small integers, exact in every dtype, so a
// correct collective reproduces the reference bit for bit; floating types
// still get a tolerance of a couple of ulps for avg's division.
//
// Every value is a hash of the element index modulo kPeriod (a prime, so
// the per-rank blocks of any world size start at different phases): one
// period is computed, the rest is copied or compared with memcmp, which
// keeps checking a 1 GB buffer at memory speed. The hash, not a linear
// formula, so that no shorter pattern repeats inside a period: a block of
// data moved by anything but a multiple of 131071 elements (half a MiB of
// floats) reads as wrong. (A linear formula of the index modulo 11 made
// every block that moved by a multiple of 11 elements look right.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "mci/types.hpp"

namespace mci::perf {

inline constexpr std::size_t kPeriod = 131071;  // 2^17 - 1, a prime

// Element i (taken modulo kPeriod) of the data identified by `key` in check
// round `round`, already rounded to dtype t. `narrow` keeps values in -2..2
// so products of many ranks stay exact.
double input_value(DType t, int key, int round, std::size_t i, bool narrow);
// The reduction with `op` over keys 0..ranks-1 of input_value, rounded to t
// (integers wrap like the type; avg divides like mci: in float for the
// floating types, truncating for integers).
double reduced_value(DType t, ReduceOp op, int ranks, int round, std::size_t i, bool narrow);

void put_value(DType t, void* base, std::size_t i, double v);
double get_value(DType t, const void* base, std::size_t i);

// f(i) for element i; must depend only on i modulo kPeriod.
using ValueFn = std::function<double(std::size_t)>;

// Writes f(i) into elements [0, count) of base.
void fill_values(DType t, void* base, std::size_t count, const ValueFn& f);
// Number of elements of got in [0, count) that differ from f(i).
std::uint64_t count_wrong(DType t, const void* got, std::size_t count, const ValueFn& f);
// Fills every byte with a pattern no check value takes, so an output the
// collective never wrote is counted as wrong.
void fill_sentinel(void* base, std::size_t bytes);

}  // namespace mci::perf
