#include "common/op_kind.hpp"

#include <array>

namespace mci {

namespace {

using E = BufferExtent;
constexpr bool kRootOnly = true, kAll = false, kFromIn = true, kFromOut = false;
// clang-format off
constexpr std::array kShapes{
  // kind, name, in, out, whose in (every rank's or the root's only), whose out, the side the count is read
  // from, rooted, reduces, p2p
  OpShape{OpKind::all_reduce,     "all_reduce",     E::one,      E::one,      kAll,      kAll,      kFromIn,  false, true,  false},
  OpShape{OpKind::broadcast,      "broadcast",      E::one,      E::one,      kRootOnly, kAll,      kFromOut, true,  false, false},
  OpShape{OpKind::reduce,         "reduce",         E::one,      E::one,      kAll,      kRootOnly, kFromIn,  true,  true,  false},
  OpShape{OpKind::all_gather,     "all_gather",     E::one,      E::per_rank, kAll,      kAll,      kFromIn,  false, false, false},
  OpShape{OpKind::gather,         "gather",         E::one,      E::per_rank, kAll,      kRootOnly, kFromIn,  true,  false, false},
  OpShape{OpKind::scatter,        "scatter",        E::per_rank, E::one,      kRootOnly, kAll,      kFromOut, true,  false, false},
  OpShape{OpKind::reduce_scatter, "reduce_scatter", E::per_rank, E::one,      kAll,      kAll,      kFromOut, false, true,  false},
  OpShape{OpKind::all_to_all,     "all_to_all",     E::per_rank, E::per_rank, kAll,      kAll,      kFromIn,  false, false, false},
  OpShape{OpKind::barrier,        "barrier",        E::none,     E::none,     kAll,      kAll,      kFromIn,  false, false, false},
  OpShape{OpKind::send,           "send",           E::one,      E::none,     kAll,      kAll,      kFromIn,  false, false, true},
  OpShape{OpKind::recv,           "recv",           E::none,     E::one,      kAll,      kAll,      kFromOut, false, false, true},
};
// clang-format on

// The rows are the list's entries, in its order: op_shape indexes them.
constexpr bool rows_follow_the_list() {
  constexpr std::array<std::string_view, kOpKindCount> names{
#define MCI_OP_KIND_NAME(id) #id,
      MCI_OP_KINDS(MCI_OP_KIND_NAME)
#undef MCI_OP_KIND_NAME
  };
  if (kShapes.size() != kOpKindCount) return false;
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    if (static_cast<std::size_t>(kShapes[i].kind) != i || kShapes[i].name != names[i]) return false;
  }
  return true;
}
static_assert(rows_follow_the_list(), "kShapes must hold one row per MCI_OP_KINDS entry, in its order");

}  // namespace

const OpShape& op_shape(OpKind k) noexcept {
  // A value outside the enum (a corrupt frame's kind, named in its error)
  // gets a row that is "?" and touches no buffer.
  static constexpr OpShape
      kUnknown{OpKind::barrier, "?", BufferExtent::none, BufferExtent::none, false, false, true, false, false, false};
  const auto i = static_cast<std::size_t>(k);
  return i < kShapes.size() ? kShapes[i] : kUnknown;
}

std::size_t side_count(BufferExtent e, bool at_root_only, bool at_root, std::size_t count, std::size_t size) noexcept {
  if (e == BufferExtent::none || (at_root_only && !at_root)) return 0;
  return e == BufferExtent::per_rank ? count * size : count;
}

std::optional<OpKind> op_kind_named(std::string_view name) noexcept {
  for (const OpShape& s : kShapes) {
    if (s.name == name) return s.kind;
  }
  return std::nullopt;
}

// nccl-tests' rule, read off the row: an all-reduce moves its data twice
// around the ring, a kind whose buffer is per rank moves (n-1)/n of it, a
// rooted or point-to-point kind all of it once, a barrier none.
double bus_factor(OpKind k, int ranks) noexcept {
  const OpShape& s = op_shape(k);
  if (ranks < 1 || (s.in == BufferExtent::none && s.out == BufferExtent::none)) return 0;
  const double n = ranks;
  if (s.in == BufferExtent::per_rank || s.out == BufferExtent::per_rank) return (n - 1) / n;
  if (s.reduces && !s.rooted) return 2 * (n - 1) / n;
  return 1;
}

}  // namespace mci
