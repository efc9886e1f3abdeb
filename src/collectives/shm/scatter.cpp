// Scatter in shared memory: the root streams the chunk for rank r straight
// into rank r's buffer; each rank copies its own buffer out. From
// kSingleCopyMinBlock, where the world can, each rank reads its block from
// the root's memory instead.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

void shm_scatter(const ShmCtx& c) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const std::size_t block = d.bytes();
  // Single copy: each rank reads its block of the root's input straight into
  // its output, all at once (staged, the root copies every block in turn).
  if (single_copy_size(c, block, fp) && single_copy_step(c, fp, in, true, [&](const std::vector<std::uintptr_t>& at) {
        const std::size_t mine = block * static_cast<std::size_t>(me);
        if (me != d.root) {
          w.read_peer(d.root, at[static_cast<std::size_t>(d.root)] + mine, out, block);
        } else if (in + mine != out) {
          std::memcpy(out, in + mine, block);
        }
      })) {
    return;
  }
  const Chunks chunks{d.count, w.buffer_bytes() / es};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k) * es, len = chunks.size(k) * es;
    shm_step(
        c, fp,
        [&](std::uint64_t s) {
          if (me != d.root) return;
          for (int r = 0; r < n; ++r) {
            if (r != me) c.copier.copy(w.staging(r, s), in + block * static_cast<std::size_t>(r) + off, len);
          }
        },
        [&](std::uint64_t s) {
          if (len == 0) return;
          if (me == d.root) {
            const std::uint8_t* src = in + block * static_cast<std::size_t>(me) + off;
            if (src != out + off) std::memcpy(out + off, src, len);
          } else {
            std::memcpy(out + off, w.staging(me, s), len);
          }
        });
  }
}

}  // namespace mci::coll
