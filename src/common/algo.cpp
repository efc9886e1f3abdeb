#include "common/algo.hpp"

#include <array>

namespace mci {

namespace {
constexpr std::array kNames{
    AlgoName{Algo::direct, "direct", ""},
    AlgoName{Algo::ring, "ring", ""},
    AlgoName{Algo::recursive_doubling, "recursive_doubling", "rd"},
    AlgoName{Algo::tree, "tree", ""},
    AlgoName{Algo::pairwise, "pairwise", ""},
    AlgoName{Algo::dissemination, "dissemination", ""},
    AlgoName{Algo::p2p, "p2p", ""},
    AlgoName{Algo::shm_direct, "shm_direct", ""},
    AlgoName{Algo::shm_sliced, "shm_sliced", ""},
    AlgoName{Algo::shm_staged, "shm_staged", ""},
    AlgoName{Algo::shm_flags, "shm_flags", ""},
    AlgoName{Algo::hierarchical, "hierarchical", "hier"},
    AlgoName{Algo::library, "library", ""},
};
}  // namespace

std::span<const AlgoName> algo_names() noexcept { return kNames; }

std::string_view algo_name(Algo a) noexcept {
  for (const auto& n : kNames) {
    if (n.algo == a) return n.name;
  }
  return "unset";
}

std::optional<Algo> algo_from_name(std::string_view s) noexcept {
  for (const auto& n : kNames) {
    if (s == n.name || (!n.alias.empty() && s == n.alias)) return n.algo;
  }
  return std::nullopt;
}

}  // namespace mci
