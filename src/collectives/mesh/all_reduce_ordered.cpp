// Ordered all-reduce and reduce: MCI_REPRODUCIBLE's algorithm between hosts.
// Rank p owns block p of the buffer: it receives block p from every rank and
// reduces the n blocks in rank order (rank 0's, then rank 1's, ...), the
// order in which the shared-memory algorithms and `direct` reduce. So each
// element is the same fold of the same values whatever the algorithm, the
// transport, or how the ranks sit on hosts: the same bits. Then the reduced
// blocks go to every rank (all_reduce) or to the root (reduce). Each rank
// sends and receives (n-1)/n of the buffer per phase, as the ring does, in
// n-1 messages a phase instead of pipelined steps.
#include <cstring>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

namespace {

// Phase 1: this rank's block, reduced in rank order, written at its place
// in d.out (in_out) or in scratch memory (a reduce's other ranks, whose
// d.out is not theirs to write). Returns where it is.
const std::uint8_t* reduce_own_block(const Ctx& c, bool in_out) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  const Blocks b{d.count, n};
  const std::size_t mine = b.size(r) * es;
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  // One slot per rank for block r, and one for the result when it is not
  // written in d.out; this rank's own is copied first: in place, d.out's
  // block r is written before the sends of it are done.
  std::uint8_t* slots = c.scratch.get(mine * static_cast<std::size_t>(n + 1));
  if (mine) std::memcpy(slots + mine * r, in + b.offset(r) * es, mine);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    t.post_send(p, fp, in + b.offset(p) * es, b.size(p) * es);
    t.post_recv(p, fp, slots + mine * p, mine);
  }
  t.wait_all(c.dl);
  std::uint8_t* dst = in_out ? static_cast<std::uint8_t*>(d.out) + b.offset(r) * es : slots + mine * n;
  fold_ranks(
      dst, [&](int p) -> const void* { return slots + mine * p; }, n, b.size(r), d.dtype, d.op);
  return dst;
}

}  // namespace

void all_reduce_ordered(const Ctx& c) {
  (void)reduce_own_block(c, true);
  auto& t = c.t;
  const int n = t.size();
  const Blocks b{c.d.count, n};
  const int r = t.rank();
  const std::size_t es = dtype_size(c.d.dtype);
  const Fingerprint fp = c.d.fingerprint();
  auto* out = static_cast<std::uint8_t*>(c.d.out);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    t.post_send(p, fp, out + b.offset(r) * es, b.size(r) * es);
    t.post_recv(p, fp, out + b.offset(p) * es, b.size(p) * es);
  }
  t.wait_all(c.dl);
}

void reduce_ordered(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  const Blocks b{d.count, n};
  const std::uint8_t* reduced = reduce_own_block(c, r == d.root);
  if (r != d.root) {
    t.post_send(d.root, fp, reduced, b.size(r) * es);
  } else {
    auto* out = static_cast<std::uint8_t*>(d.out);
    for (int p = 0; p < n; ++p) {
      if (p != r) t.post_recv(p, fp, out + b.offset(p) * es, b.size(p) * es);
    }
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
