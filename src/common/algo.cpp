#include "common/algo.hpp"

namespace mci {

std::string_view algo_name(Algo a) noexcept {
  switch (a) {
    case Algo::none: return "default";
    case Algo::direct: return "direct";
    case Algo::ring: return "ring";
    case Algo::recursive_doubling: return "recursive_doubling";
    case Algo::tree: return "tree";
    case Algo::shm_direct: return "shm_direct";
    case Algo::shm: return "shm";
    case Algo::hierarchical: return "hierarchical";
  }
  return "?";
}

std::optional<Algo> parse_algo(std::string_view s) noexcept {
  if (s.empty() || s == "auto") return Algo::none;
  if (s == "direct") return Algo::direct;
  if (s == "ring") return Algo::ring;
  if (s == "recursive_doubling" || s == "rd") return Algo::recursive_doubling;
  if (s == "tree") return Algo::tree;
  if (s == "hierarchical" || s == "hier") return Algo::hierarchical;
  return std::nullopt;
}

}  // namespace mci
