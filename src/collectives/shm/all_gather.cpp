// All-gather and gather in shared memory: every rank streams its block (a
// chunk at a time) into its buffer; every rank (gather: the root) copies
// every buffer to its place in the output. From kSingleCopyMinBlock, where
// the world can, each reads the others' blocks straight from their memory.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

void shm_all_gather(const ShmCtx& c) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  const bool want = d.kind == OpKind::all_gather || me == d.root;
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const std::size_t block = d.bytes();
  // Single copy: each rank (gather: the root) reads every peer's block
  // straight into its output.
  if (single_copy_size(c, block, fp) && single_copy_step(c, fp, in, true, [&](const std::vector<std::uintptr_t>& at) {
        if (!want) return;
        for (int r = 0; r < n; ++r) {
          std::uint8_t* dst = out + block * static_cast<std::size_t>(r);
          if (r != me) {
            w.read_peer(r, at[static_cast<std::size_t>(r)], dst, block);
          } else if (in != dst) {
            std::memcpy(dst, in, block);
          }
        }
      })) {
    return;
  }
  const Chunks chunks{d.count, w.buffer_bytes() / es};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k) * es, len = chunks.size(k) * es;
    shm_step(
        c, fp, [&](std::uint64_t s) { c.copier.copy(w.staging(me, s), in + off, len); },
        [&](std::uint64_t s) {
          if (!want || len == 0) return;
          for (int r = 0; r < n; ++r) {
            std::uint8_t* dst = out + block * static_cast<std::size_t>(r) + off;
            if (r == me) {
              if (in != out + block * static_cast<std::size_t>(me)) std::memcpy(dst, in + off, len);
            } else {
              std::memcpy(dst, w.staging(r, s), len);
            }
          }
        });
  }
}

}  // namespace mci::coll
