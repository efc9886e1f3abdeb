#include "ddp/model_check.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mci/errors.hpp"

namespace mci::ddp {
namespace {

// Per parameter, what the ranks compare: count, dtype, a hash of the name,
// the number of dimensions (-1: a raw buffer) and the first kDims sizes.
constexpr std::size_t kDims = 4;
constexpr std::size_t kEntry = 4 + kDims;

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<std::int64_t> entry_of(const ParamInfo& p) {
  std::vector<std::int64_t> e(kEntry, 0);
  e[0] = static_cast<std::int64_t>(p.count);
  e[1] = static_cast<std::int64_t>(p.dtype);
  e[2] = static_cast<std::int64_t>(fnv1a(p.name) >> 1);
  e[3] = p.shape.empty() ? -1 : static_cast<std::int64_t>(p.shape.size());
  for (std::size_t d = 0; d < std::min(kDims, p.shape.size()); ++d) e[4 + d] = p.shape[d];
  return e;
}

// Number of parameters, total elements, and a hash of every entry.
std::vector<std::int64_t> summary(const std::vector<ParamInfo>& params) {
  std::uint64_t h = 1469598103934665603ull;
  std::int64_t total = 0;
  for (const auto& p : params) {
    for (std::int64_t v : entry_of(p)) h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
    total += static_cast<std::int64_t>(p.count);
  }
  return {static_cast<std::int64_t>(params.size()), total, static_cast<std::int64_t>(h)};
}

std::string describe(const std::int64_t* e) {
  if (e[0] < 0) return "no parameter";
  const auto dtype = dtype_name(static_cast<DType>(e[1]));
  if (e[3] < 0 || static_cast<std::size_t>(e[3]) > kDims) return fmt::format("{} {} values", e[0], dtype);
  return fmt::format("{} [{}]", dtype, fmt::join(e + 4, e + 4 + e[3], ", "));
}

// Every rank's entries, padded to `most` parameters; names the first
// parameter of this rank that differs from another rank's.
std::string first_difference(ProcessGroup& g, const std::vector<ParamInfo>& params, std::size_t most) {
  std::vector<std::int64_t> mine(most * kEntry, -1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto e = entry_of(params[i]);
    std::copy(e.begin(), e.end(), mine.begin() + static_cast<std::ptrdiff_t>(i * kEntry));
  }
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(g.size()));
  g.all_gather(view(mine), view(all));
  for (std::size_t i = 0; i < most; ++i) {
    const std::int64_t* m = mine.data() + i * kEntry;
    for (int r = 0; r < g.size(); ++r) {
      const std::int64_t* theirs = all.data() + mine.size() * static_cast<std::size_t>(r) + i * kEntry;
      if (std::equal(m, m + kEntry, theirs)) continue;
      const std::string name = i < params.size() ? "'" + params[i].name + "'" : "(none here)";
      const bool only_name = m[0] >= 0 && theirs[0] >= 0 && m[2] != theirs[2] &&
                             std::equal(m + 3, m + kEntry, theirs + 3) && m[0] == theirs[0] && m[1] == theirs[1];
      const std::string what =
          only_name ? fmt::format("rank {} names it {}, rank {} gives it another name", g.rank(), name, r)
                    : fmt::format("rank {} has {}, rank {} has {}", g.rank(), describe(m), r, describe(theirs));
      return fmt::format(
          "DistributedDataParallel: the model differs between ranks at parameter {} {}: {}. Every rank must "
          "wrap the same model (same parameters, in the same order, with the same names, shapes and dtypes).",
          i, name, what);
    }
  }
  return "DistributedDataParallel: the model differs between ranks (same sizes, different order)";
}

}  // namespace

void check_same_model(ProcessGroup& g, const std::vector<ParamInfo>& params) {
  const auto mine = summary(params);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(g.size()));
  g.all_gather(view(mine), view(all));
  bool same = true;
  std::int64_t most = 0;
  for (int r = 0; r < g.size(); ++r) {
    const std::int64_t* s = all.data() + mine.size() * static_cast<std::size_t>(r);
    same = same && std::equal(s, s + mine.size(), mine.begin());
    most = std::max(most, s[0]);
  }
  // Every rank sees the same summaries, so all of them take this branch and
  // its second all-gather together.
  if (!same) throw MismatchError(first_difference(g, params, static_cast<std::size_t>(most)));
}

}  // namespace mci::ddp
