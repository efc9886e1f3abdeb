// Reduce-scatter in shared memory: per chunk, every rank streams the chunk of
// each block the others reduce into its buffer (n pieces side by side; its
// own block stays in its input); rank r then reduces piece r of every buffer
// and its own block, in rank order, into its output.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

void shm_reduce_scatter(const ShmCtx& c) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const std::size_t block = d.bytes();
  const std::size_t piece = w.buffer_bytes() / (static_cast<std::size_t>(n) * es);  // elements
  const Chunks chunks{d.count, std::max<std::size_t>(piece, 1)};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k) * es, len = chunks.size(k);
    shm_step(
        c, fp,
        [&](std::uint64_t s) {
          for (int b = 0; b < n; ++b) {
            if (b == me) continue;
            c.copier.copy(w.staging(me, s) + piece * es * static_cast<std::size_t>(b),
                          in + block * static_cast<std::size_t>(b) + off, len * es);
          }
        },
        [&](std::uint64_t s) {
          if (len == 0) return;
          const std::size_t mine = piece * es * static_cast<std::size_t>(me);
          const std::uint8_t* own = in + block * static_cast<std::size_t>(me) + off;
          // In place (out is this rank's block of in), the accumulation into
          // out overwrites `own` before rank 2 and up use it: keep a copy.
          if (own == out + off && me >= 2) {
            std::uint8_t* copy = c.scratch.get(len * es);
            std::memcpy(copy, own, len * es);
            own = copy;
          }
          auto src = [&](int r) -> const void* { return r == me ? own : w.staging(r, s) + mine; };
          fold_ranks(out + off, src, n, len, d.dtype, d.op);
        });
  }
}

}  // namespace mci::coll
