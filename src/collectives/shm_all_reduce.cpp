// All-reduce (and reduce) in shared memory.
//
// shm_direct (small buffers), per chunk: every rank posts its chunk and
// reduces all of them itself, in rank order, so every rank computes the same
// bits. shm (large buffers), per chunk: every rank streams its chunk into its buffer;
// rank r reduces slice r of the chunk across all buffers into its result
// buffer; then every rank copies all result slices out. Each element is
// reduced once, by one rank, so all ranks again hold the same bits.
#include <cstring>

#include "collectives/copy_kernels.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/shm_algorithms.hpp"

namespace mci::coll {

namespace {

void reduce_all_buffers(const ShmCtx& c, std::uint64_t s, std::size_t offset_bytes, std::size_t count,
                        std::uint8_t* dst) {
  const auto& d = c.d;
  const int n = c.w.size();
  if (count == 0) return;
  reduce_to(dst, c.w.staging(0, s) + offset_bytes, c.w.staging(1, s) + offset_bytes, count, d.dtype, d.op);
  for (int r = 2; r < n; ++r) reduce_into(dst, c.w.staging(r, s) + offset_bytes, count, d.dtype, d.op);
  if (d.op == ReduceOp::avg) finish_avg(dst, count, d.dtype, n);
}

void run(const ShmCtx& c, bool everyone_gets_result) {
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
    const auto fill = [&](std::uint64_t s) { copy_to_shared(w.staging(me, s), in + off * es, len * es); };
    if (d.algo == Algo::shm_direct) {
      shm_step(c, fp, fill, [&](std::uint64_t s) {
        if (want) reduce_all_buffers(c, s, 0, len, out + off * es);
      });
      continue;
    }
    const Blocks slices{len, n};
    shm_step(c, fp, fill, [&](std::uint64_t s) {
      reduce_all_buffers(c, s, slices.offset(me) * es, slices.size(me), w.result(me, s));
      w.post_reduced(s);
      if (!want) return;
      w.wait_reduced(s, fp, c.dl);
      for (int r = 0; r < n; ++r) {
        if (slices.size(r)) std::memcpy(out + (off + slices.offset(r)) * es, w.result(r, s), slices.size(r) * es);
      }
    });
  }
}

}  // namespace

void shm_all_reduce(const ShmCtx& c) { run(c, true); }
void shm_reduce(const ShmCtx& c) { run(c, false); }

}  // namespace mci::coll
