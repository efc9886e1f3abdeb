// The sizes a run measures: -b min to -e max, multiplied by -f each step, or
// increased by -i bytes each step (nccl-tests' rule).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mci::perf {

// "8", "64K", "1M", "2G" (powers of 1024, either case, an optional trailing
// B: "1MB"). Throws UsageError naming `flag` for anything else or overflow.
std::size_t parse_bytes(std::string_view text, std::string_view flag);

// Human form of a byte count for messages: 1048576 -> "1M", 1000 -> "1000".
std::string bytes_text(std::size_t bytes);

struct SweepSpec {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 32u << 20;
  std::size_t step_factor = 2;  // geometric when step_bytes == 0
  std::size_t step_bytes = 0;   // linear when > 0
};

// At most this many sizes: a mistyped -i should fail fast, not run for days.
inline constexpr std::size_t kMaxSweepSizes = 4096;

// Every size from min to max inclusive. Throws UsageError when the spec
// cannot make progress (factor < 2 without -i, -b 0 with a factor) or has
// more than kMaxSweepSizes sizes.
std::vector<std::size_t> size_sweep(const SweepSpec& spec);

}  // namespace mci::perf
