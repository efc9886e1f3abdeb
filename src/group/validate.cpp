#include "group/validate.hpp"

#include "common/byte_ranges.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "mci/process_group.hpp"

namespace mci {

namespace {

struct Check {
  OpKind kind;
  int rank;

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(fmt::format("invalid {} on rank {}: {}", op_name(kind), rank, what));
  }
  void buffer(const BufferView& b, const char* name) const {
    if (static_cast<unsigned>(b.dtype) > static_cast<unsigned>(DType::i64)) {
      fail(fmt::format("{} has an unknown dtype ({})", name, static_cast<unsigned>(b.dtype)));
    }
    if (b.count > 0 && b.data == nullptr) {
      fail(fmt::format("{} has {} elements but a null data pointer", name, b.count));
    }
    // Below 2^53 elements no dtype (8 bytes at most) passes 2^56 bytes: no
    // division on the fast path.
    if (b.count > (std::uint64_t{1} << 53) && b.count > (std::uint64_t{1} << 56) / dtype_size(b.dtype)) {
      fail(fmt::format("{} claims {} elements, more than any real buffer holds", name, b.count));
    }
  }
  void same_dtype(const BufferView& in, const BufferView& out) const {
    if (in.dtype != out.dtype) {
      fail(fmt::format("in is {} but out is {}: both buffers must have the same dtype", dtype_name(in.dtype),
                       dtype_name(out.dtype)));
    }
  }
  // `why` names the rule; `per_rank` says it is "<why> x <size> ranks".
  void count_is(const BufferView& b, const char* name, std::size_t want, const char* why, int size = 0) const {
    if (b.count == want) return;
    if (size > 0) {
      fail(fmt::format("{} has {} elements but must have {} ({} x the group has {} ranks)", name, b.count, want, why,
                       size));
    }
    fail(fmt::format("{} has {} elements but must have {} ({})", name, b.count, want, why));
  }
  void root(int r, int size, const char* what = "root") const {
    if (r < 0 || r >= size) {
      fail(fmt::format("{} {} is out of range: the group has ranks 0..{}", what, r, size - 1));
    }
  }
};

bool overlaps(const BufferView& a, const BufferView& b) { return ranges_overlap(a.data, a.bytes(), b.data, b.bytes()); }

}  // namespace

coll::CollectiveDesc make_desc(const Call& call, int rank, int size) {
  const OpKind kind = call.kind;
  const BufferView& in = call.in;
  const BufferView& out = call.out;
  const ReduceOp op = call.op;
  const int root = call.root, peer = call.peer, tag = call.tag;
  const Check c{kind, rank};
  if (static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::max)) {
    c.fail(fmt::format("unknown reduce op ({})", static_cast<unsigned>(op)));
  }
  coll::CollectiveDesc d;
  d.kind = kind;
  d.op = op;
  d.root = root;
  d.peer = peer;
  d.tag = tag;
  d.dtype = in.dtype;
  d.device = in.device;
  d.in = in.data;
  d.out = out.data;
  const auto n = static_cast<std::size_t>(size);
  const bool at_root = rank == root;

  // Which buffers matter on this rank, and how large they must be: the
  // kind's shape says (common/op_kind.cpp).
  const OpShape& shape = op_shape(kind);
  const bool uses_in = shape.in != BufferExtent::none && !(shape.in_at_root_only && !at_root);
  const bool uses_out = shape.out != BufferExtent::none && !(shape.out_at_root_only && !at_root);
  if (uses_in) c.buffer(in, "in");
  if (uses_out) c.buffer(out, "out");
  if (uses_in && uses_out) c.same_dtype(in, out);
  if (!uses_in) {
    d.dtype = out.dtype;
    d.device = out.device;
  }
  if (shape.rooted) c.root(root, size);

  if (shape.in == BufferExtent::none && shape.out == BufferExtent::none) {  // barrier: no data at all
    d.count = 0;
    d.dtype = DType::u8;
    d.in = d.out = nullptr;
  } else {
    // The count is read from one side; the other, where this rank uses it,
    // must hold what the shape says.
    const BufferView& counted = shape.count_from_in ? in : out;
    const char* counted_name = shape.count_from_in ? "in" : "out";
    const BufferExtent counted_extent = shape.count_from_in ? shape.in : shape.out;
    if (counted_extent == BufferExtent::per_rank && counted.count % n != 0) {
      c.fail(fmt::format("{} has {} elements, not a multiple of the {} ranks (one equal block per rank)", counted_name,
                         counted.count, size));
    }
    d.count = counted_extent == BufferExtent::per_rank ? counted.count / n : counted.count;
    const bool other_used = shape.count_from_in ? uses_out : uses_in;
    if (other_used) {
      const BufferView& other = shape.count_from_in ? out : in;
      const char* other_name = shape.count_from_in ? "out" : "in";
      const BufferExtent other_extent = shape.count_from_in ? shape.out : shape.in;
      if (other_extent == counted_extent) {
        c.count_is(other, other_name, counted.count, shape.count_from_in ? "the same as in" : "the same as out");
      } else {
        c.count_is(other, other_name, counted.count * n, shape.count_from_in ? "in.count" : "out.count", size);
      }
    }
  }
  if (shape.p2p) {
    if (peer == any_source && kind == OpKind::send) {
      c.fail(
          fmt::format("destination rank {} is any_source, which only a recv takes: a send needs the rank it goes "
                      "to (0..{})",
                      peer, size - 1));
    }
    if (kind == OpKind::send) {
      c.root(peer, size, "destination rank");
    } else if (peer != any_source && (peer < 0 || peer >= size)) {
      // any_source passes here; the backend says whether it can do it.
      c.fail(
          fmt::format("source rank {} is out of range: the group has ranks 0..{} (or mci::any_source, -1, for "
                      "whichever rank sends first)",
                      peer, size - 1));
    }
    if (peer == any_source && size == 1) {
      c.fail("it receives from any source in a group of one rank: no other rank can send to it");
    }
    if (peer == rank) {
      c.fail(fmt::format("rank {} cannot {} itself: a point-to-point peer must be another rank", rank,
                         kind == OpKind::send ? "send to" : "receive from"));
    }
    if (tag < 0) c.fail(fmt::format("tag {} is negative: tags are 0 or more", tag));
  }

  // Out-of-place buffers must not overlap, except in the in-place layouts:
  // same pointer, or in being this rank's slice of out (all_gather, gather:
  // one in, per-rank out) or out being this rank's slice of in
  // (reduce_scatter, scatter).
  if (uses_in && uses_out && in.data != out.data && overlaps(in, out)) {
    const std::size_t es = dtype_size(d.dtype);
    const auto* ob = static_cast<const std::uint8_t*>(out.data);
    const auto* ib = static_cast<const std::uint8_t*>(in.data);
    const bool slice_of_out = shape.in == BufferExtent::one && shape.out == BufferExtent::per_rank &&
                              ib == ob + static_cast<std::size_t>(rank) * d.count * es;
    const bool slice_of_in = shape.in == BufferExtent::per_rank && shape.out == BufferExtent::one &&
                             ob == ib + static_cast<std::size_t>(rank) * d.count * es;
    const bool blocks_both = shape.in == BufferExtent::per_rank && shape.out == BufferExtent::per_rank;  // all_to_all
    if (!slice_of_out && !slice_of_in && !blocks_both) {
      c.fail("in and out overlap: pass the same buffer for both (in place) or two separate buffers");
    }
  }
  return d;
}

}  // namespace mci
