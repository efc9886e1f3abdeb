#include "monitor/positions.hpp"

#include <algorithm>

namespace mci::monitor {

std::vector<int> Positions::of(Where w) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < where.size(); ++i) {
    if (where[i] == w) out.push_back(ranks[i]);
  }
  return out;
}

std::uint64_t furthest_position(std::span<const RankPlace> places) {
  std::uint64_t top = 0;
  for (const RankPlace& p : places) top = std::max(top, p.entered);
  return top;
}

namespace {

Where where_is(const RankPlace& p, std::uint64_t position, std::string_view what) {
  switch (p.life) {
    case Life::done: return Where::done;
    case Life::lost: return Where::lost;
    case Life::silent: return Where::silent;
    case Life::no_group: return Where::never_entered;
    case Life::alive: break;
  }
  if (p.entered < position) return Where::never_entered;
  if (p.running_seq == position) return p.running == what ? Where::waiting : Where::elsewhere;
  // It has left the position: what it called there, when it says.
  if (!p.at_position.empty() && p.at_position != what) return Where::elsewhere;
  return Where::passed;
}

}  // namespace

Positions classify_positions(std::span<const RankPlace> places, std::uint64_t position, std::string_view what) {
  Positions out;
  out.position = position;
  for (const RankPlace& p : places) {
    const Where w = where_is(p, position, what);
    out.where.push_back(w);
    out.ranks.push_back(p.rank);
    if (w == Where::never_entered || w == Where::elsewhere || w == Where::lost) out.missing.push_back(p.rank);
  }
  std::sort(out.missing.begin(), out.missing.end());
  return out;
}

}  // namespace mci::monitor
