#include "common/op_kind.hpp"

namespace mci {

std::size_t side_count(BufferExtent e, bool at_root_only, bool at_root, std::size_t count, std::size_t size) noexcept {
  if (e == BufferExtent::none || (at_root_only && !at_root)) return 0;
  return e == BufferExtent::per_rank ? count * size : count;
}

std::optional<OpKind> op_kind_named(std::string_view name) noexcept {
  for (const OpShape& s : kOpShapes) {
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
