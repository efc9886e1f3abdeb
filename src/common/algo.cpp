#include "common/algo.hpp"

#include <array>

namespace mci {

namespace {

constexpr std::array kNames{
#define MCI_ALGO_NAME(id, alias, what) AlgoName{Algo::id, #id, alias},
    MCI_ALGORITHMS(MCI_ALGO_NAME)
#undef MCI_ALGO_NAME
};
static_assert(kNames.size() + 1 == kAlgoCount);

}  // namespace

std::span<const AlgoName> algo_names() noexcept { return kNames; }

std::string_view algo_name(Algo a) noexcept {
  // Made from one list, the table is in enum order: index, not search.
  const auto i = static_cast<std::size_t>(a);
  return i >= 1 && i < kAlgoCount ? kNames[i - 1].name : "unset";
}

std::optional<Algo> algo_from_name(std::string_view s) noexcept {
  for (const auto& n : kNames) {
    if (s == n.name || (!n.alias.empty() && s == n.alias)) return n.algo;
  }
  return std::nullopt;
}

}  // namespace mci
