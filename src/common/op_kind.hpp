// The kinds of operation a group runs (collectives and point-to-point), and
// each one's shape: its name, which buffers it reads and writes and how
// large they are, whether it has a root or a reduce op. Validation, device
// staging, selection, fingerprints and the dispatch index read the row
// instead of switching over the kinds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mci {

// The one list of kinds; the enum and its count come from it, and the
// shape table (op_kind.cpp) has one row per entry, in this order.
#define MCI_OP_KINDS(X) \
  X(all_reduce)         \
  X(broadcast) X(reduce) X(all_gather) X(gather) X(scatter) X(reduce_scatter) X(all_to_all) X(barrier) X(send) X(recv)

enum class OpKind : std::uint8_t {
#define MCI_OP_KIND_ENUMERATOR(id) id,
  MCI_OP_KINDS(MCI_OP_KIND_ENUMERATOR)
#undef MCI_OP_KIND_ENUMERATOR
};

inline constexpr std::size_t kOpKindCount = 0
#define MCI_OP_KIND_COUNT(id) +1
    MCI_OP_KINDS(MCI_OP_KIND_COUNT)
#undef MCI_OP_KIND_COUNT
    ;

// How large a buffer is, in elements of the operation's count: none, the
// count, or the count once per rank of the group.
enum class BufferExtent : std::uint8_t { none, one, per_rank };

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

const OpShape& op_shape(OpKind k) noexcept;
inline std::string_view op_name(OpKind k) noexcept { return op_shape(k).name; }
inline bool is_p2p(OpKind k) noexcept { return op_shape(k).p2p; }
inline bool has_root(OpKind k) noexcept { return op_shape(k).rooted; }
inline bool has_reduce_op(OpKind k) noexcept { return op_shape(k).reduces; }

// The kind named `name` ("all_reduce"), or nullopt.
std::optional<OpKind> op_kind_named(std::string_view name) noexcept;
// nccl-tests' bus bandwidth factor for `ranks` ranks: busbw = algbw * factor.
double bus_factor(OpKind k, int ranks) noexcept;

// Elements of this side's buffer on a rank (0 for a side it does not use).
std::size_t side_count(BufferExtent e, bool at_root_only, bool at_root, std::size_t count, std::size_t size) noexcept;

}  // namespace mci
