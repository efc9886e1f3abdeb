// All-reduce (and reduce) in shared memory.
//
// shm_direct (small buffers), per chunk: every rank posts its chunk and
// reduces all of them itself, in rank order, so every rank computes the same
// bits. shm_sliced (large buffers), per chunk: every rank copies its chunk into its buffer;
// rank r reduces slice r of the chunk across all buffers into its result
// buffer; then every rank copies all result slices out. Each element is
// reduced once, by one rank, so all ranks again hold the same bits.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

namespace {

// Reduces `count` elements at element offset `at` of the chunk across all
// ranks, in rank order (the same bits on every rank). This rank's own
// contribution comes from `own`, the others' from where they posted them
// (`base(r)`, the start of their chunk).
template <class Base>
void reduce_slice(const ShmCtx& c, const std::uint8_t* own, Base base, std::size_t at, std::size_t count,
                  std::uint8_t* dst) {
  const auto& d = c.d;
  const int n = c.w.size(), me = c.w.rank();
  if (count == 0) return;
  const std::size_t es = dtype_size(d.dtype);
  // In place, `own` is `dst`: keep this rank's contribution aside, since the
  // rank-order accumulation into dst overwrites it before it is used (rank 2
  // and up).
  if (own == dst && me >= 2) {
    std::uint8_t* copy = c.scratch.get(count * es);
    std::memcpy(copy, own, count * es);
    own = copy;
  }
  auto src = [&](int r) -> const void* { return r == me ? own : base(r) + at * es; };
  fold_ranks(dst, src, n, count, d.dtype, d.op);
}

void run(const ShmCtx& c, bool everyone_gets_result, bool direct) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  const bool want = everyone_gets_result || me == d.root;
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const Chunks chunks{d.count, w.buffer_bytes() / es};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k), len = chunks.size(k);
    if (direct) {
      // Everyone needs everything: stage the whole chunk, reduce it all.
      shm_step(
          c, fp, [&](std::uint64_t s) { c.copier.copy(posted(c, me, s, len * es), in + off * es, len * es); },
          [&](std::uint64_t s) {
            if (!want) return;
            // The posted copy, not `in`: in place, `out` overwrites `in`.
            const std::uint8_t* own = posted(c, me, s, len * es);
            reduce_slice(
                c, own, [&](int r) { return posted(c, r, s, len * es); }, 0, len, out + off * es);
          });
      continue;
    }
    // Sliced: rank r reduces slice r of the chunk. Each rank stages only the
    // slices the others reduce; shared writes go through the copier.
    const Blocks slices{len, n};
    const std::size_t mine_at = slices.offset(me), mine = slices.size(me);
    std::uint8_t* scratch = want ? nullptr : c.scratch.get(mine * es);
    shm_step(
        c, fp,
        [&](std::uint64_t s) {
          for (int r = 0; r < n; ++r) {
            if (r == me) continue;
            c.copier.copy(w.staging(me, s) + slices.offset(r) * es, in + (off + slices.offset(r)) * es,
                          slices.size(r) * es);
          }
        },
        [&](std::uint64_t s) {
          std::uint8_t* dst = want ? out + (off + mine_at) * es : scratch;
          reduce_slice(
              c, in + (off + mine_at) * es, [&](int r) { return w.staging(r, s); }, mine_at, mine, dst);
          c.copier.copy(w.result(me, s), dst, mine * es);
          w.post_reduced(s);
          if (!want) return;
          w.wait_reduced(s, fp, c.dl);
          for (int r = 0; r < n; ++r) {
            if (r != me && slices.size(r)) {
              std::memcpy(out + (off + slices.offset(r)) * es, w.result(r, s), slices.size(r) * es);
            }
          }
        });
  }
}

}  // namespace

void shm_all_reduce_direct(const ShmCtx& c) { run(c, true, true); }
void shm_all_reduce_sliced(const ShmCtx& c) { run(c, true, false); }
void shm_reduce_direct(const ShmCtx& c) { run(c, false, true); }
void shm_reduce_sliced(const ShmCtx& c) { run(c, false, false); }

}  // namespace mci::coll
