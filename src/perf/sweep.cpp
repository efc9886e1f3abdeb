#include "perf/sweep.hpp"

#include <cctype>
#include <limits>
#include <string>

#include "mci/errors.hpp"

namespace mci::perf {

std::size_t parse_bytes(std::string_view text, std::string_view flag) {
  auto bad = [&](const std::string& why) {
    return UsageError(std::string(flag) + " " + std::string(text) + ": " + why);
  };
  std::size_t i = 0;
  std::size_t value = 0;
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (kMax - digit) / 10) throw bad("too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) throw bad("expected a byte count such as 8, 64K, 1M or 2G");
  std::string suffix;
  for (; i < text.size(); ++i) suffix.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  if (suffix.size() == 2 && suffix[1] == 'B') suffix.pop_back();
  if (suffix == "B") suffix.clear();
  unsigned shift = 0;
  if (suffix == "K") {
    shift = 10;
  } else if (suffix == "M") {
    shift = 20;
  } else if (suffix == "G") {
    shift = 30;
  } else if (suffix == "T") {
    shift = 40;
  } else if (!suffix.empty()) {
    throw bad("unknown suffix '" + suffix + "' (use K, M or G: powers of 1024)");
  }
  if (shift > 0 && value > (kMax >> shift)) throw bad("too large");
  return value << shift;
}

std::string bytes_text(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  std::size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + kUnits[unit];
}

std::vector<std::size_t> size_sweep(const SweepSpec& spec) {
  if (spec.min_bytes > spec.max_bytes) {
    throw UsageError("-b " + bytes_text(spec.min_bytes) + " is larger than -e " + bytes_text(spec.max_bytes));
  }
  const bool linear = spec.step_bytes > 0;
  if (!linear && spec.step_factor < 2) {
    throw UsageError("-f " + std::to_string(spec.step_factor) +
                     " never grows the size: use a factor of 2 or more, or linear steps with -i");
  }
  if (!linear && spec.min_bytes == 0 && spec.max_bytes > 0) {
    throw UsageError("-b 0 with a step factor stays at 0: start at one element or more, or use -i");
  }
  std::vector<std::size_t> sizes;
  for (std::size_t s = spec.min_bytes;;) {
    if (sizes.size() == kMaxSweepSizes) {
      throw UsageError("the sweep from -b " + bytes_text(spec.min_bytes) + " to -e " + bytes_text(spec.max_bytes) +
                       " has more than " + std::to_string(kMaxSweepSizes) + " sizes: use a larger -i or -f");
    }
    sizes.push_back(s);
    if (s == spec.max_bytes) break;
    // Stop before the next step passes max (or overflows).
    const std::size_t room = spec.max_bytes - s;
    if (linear) {
      if (spec.step_bytes > room) break;
      s += spec.step_bytes;
    } else {
      if (s > spec.max_bytes / spec.step_factor) break;
      s *= spec.step_factor;
    }
  }
  return sizes;
}

}  // namespace mci::perf
