// The kinds of operation a group runs (collectives and point-to-point), one
// row each: its name, which buffers it reads and writes and how large they
// are, whether it has a root or a reduce op. Everything that must know the
// kinds reads the rows instead of switching over them: validation, device
// staging, selection, fingerprints, dispatch, the backends' capabilities
// (mci/backend_caps.hpp), the C interface, mci-perf and the torch backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace mci {

// How large a buffer is, in elements of the operation's count: none, the
// count, or the count once per rank of the group.
enum class BufferExtent : std::uint8_t { none, one, per_rank };

// The words of the rows below.
namespace op_row {
inline constexpr BufferExtent none = BufferExtent::none, one = BufferExtent::one, per_rank = BufferExtent::per_rank;
inline constexpr bool every = false, root = true;  // whose buffer: every rank's, or the root's only
inline constexpr bool in = true, out = false;      // the side the count is read from
}  // namespace op_row

// The one list of kinds, a row each: the enum, its count and the shape table
// are made from it, in its order. Columns: the kind; its input and output
// extents; whose input and whose output (every rank's, or only the root's:
// broadcast's and scatter's input, reduce's and gather's output); the side
// the count is read from (divided by the group size when that side is
// per_rank); has a root; takes a reduce op; point-to-point (one send
// matched by one receive: no sequence number, no group-wide fingerprint).
// clang-format off
#define MCI_OP_KINDS(X)                                                                          \
  X(all_reduce,     one,      one,      every, every, in,  false, true,  false)                  \
  X(broadcast,      one,      one,      root,  every, out, true,  false, false)                  \
  X(reduce,         one,      one,      every, root,  in,  true,  true,  false)                  \
  X(all_gather,     one,      per_rank, every, every, in,  false, false, false)                  \
  X(gather,         one,      per_rank, every, root,  in,  true,  false, false)                  \
  X(scatter,        per_rank, one,      root,  every, out, true,  false, false)                  \
  X(reduce_scatter, per_rank, one,      every, every, out, false, true,  false)                  \
  X(all_to_all,     per_rank, per_rank, every, every, in,  false, false, false)                  \
  X(barrier,        none,     none,     every, every, in,  false, false, false)                  \
  X(send,           one,      none,     every, every, in,  false, false, true)                   \
  X(recv,           none,     one,      every, every, out, false, false, true)
// clang-format on

enum class OpKind : std::uint8_t {
#define MCI_OP_KIND_ENUMERATOR(id, ...) id,
  MCI_OP_KINDS(MCI_OP_KIND_ENUMERATOR)
#undef MCI_OP_KIND_ENUMERATOR
};

inline constexpr std::size_t kOpKindCount = 0
#define MCI_OP_KIND_COUNT(id, ...) +1
    MCI_OP_KINDS(MCI_OP_KIND_COUNT)
#undef MCI_OP_KIND_COUNT
    ;

struct OpShape {
  OpKind kind;
  std::string_view name;
  BufferExtent in;
  BufferExtent out;
  bool in_at_root_only;   // only the root passes an input (broadcast, scatter)
  bool out_at_root_only;  // only the root receives (reduce, gather)
  bool count_from_in;     // the count is read from in (else from out), divided by the group size if per_rank
  bool rooted;            // has a root rank
  bool reduces;           // takes a reduce op
  bool p2p;               // one send matched by one receive: no sequence number, no group-wide fingerprint
};

inline constexpr std::array<OpShape, kOpKindCount> kOpShapes{{
#define MCI_OP_SHAPE_ROW(id, in_extent, out_extent, whose_in, whose_out, count_side, rooted, reduces, p2p) \
  OpShape{OpKind::id,                                                                                      \
          #id,                                                                                             \
          op_row::in_extent,                                                                               \
          op_row::out_extent,                                                                              \
          op_row::whose_in,                                                                                \
          op_row::whose_out,                                                                               \
          op_row::count_side,                                                                              \
          rooted,                                                                                          \
          reduces,                                                                                         \
          p2p},
    MCI_OP_KINDS(MCI_OP_SHAPE_ROW)
#undef MCI_OP_SHAPE_ROW
}};

// Every kind, in the list's order (for loops over the kinds).
inline constexpr std::array<OpKind, kOpKindCount> kAllOpKinds = [] {
  std::array<OpKind, kOpKindCount> out{};
  for (std::size_t i = 0; i < kOpKindCount; ++i) out[i] = kOpShapes[i].kind;
  return out;
}();

// A value outside the enum (a corrupt frame's kind, named in its error) gets
// a row that is "?" and touches no buffer.
inline constexpr OpShape kUnknownOpShape{
    OpKind::barrier, "?", BufferExtent::none, BufferExtent::none, false, false, true, false, false, false};

constexpr const OpShape& op_shape(OpKind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < kOpShapes.size() ? kOpShapes[i] : kUnknownOpShape;
}
constexpr std::string_view op_name(OpKind k) noexcept { return op_shape(k).name; }
constexpr bool is_p2p(OpKind k) noexcept { return op_shape(k).p2p; }
constexpr bool has_root(OpKind k) noexcept { return op_shape(k).rooted; }
constexpr bool has_reduce_op(OpKind k) noexcept { return op_shape(k).reduces; }

// The kind named `name` ("all_reduce"), or nullopt.
std::optional<OpKind> op_kind_named(std::string_view name) noexcept;

// nccl-tests' bus bandwidth factor for `ranks` ranks: busbw = algbw *
// factor (the bytes each rank moves over its busiest link, whatever the
// collective and the group size; nccl-tests' doc/PERFORMANCE.md).
double bus_factor(OpKind k, int ranks) noexcept;

// A set of kinds (what a backend runs: BackendCaps::kinds).
class OpKindSet {
 public:
  constexpr OpKindSet() = default;
  constexpr OpKindSet(std::initializer_list<OpKind> kinds) noexcept {
    for (OpKind k : kinds) bits_ |= bit(k);
  }
  static constexpr OpKindSet all() noexcept {
    OpKindSet s;
    for (OpKind k : kAllOpKinds) s.bits_ |= bit(k);
    return s;
  }
  constexpr bool contains(OpKind k) const noexcept { return (bits_ & bit(k)) != 0; }
  constexpr OpKindSet without(OpKind k) const noexcept {
    OpKindSet s = *this;
    s.bits_ &= ~bit(k);
    return s;
  }
  constexpr bool operator==(const OpKindSet&) const noexcept = default;

 private:
  static constexpr std::uint64_t bit(OpKind k) noexcept {
    const auto i = static_cast<std::size_t>(k);
    return i < kOpKindCount ? std::uint64_t{1} << i : 0;
  }
  std::uint64_t bits_ = 0;
};
static_assert(kOpKindCount <= 64, "OpKindSet holds at most 64 kinds");

}  // namespace mci
