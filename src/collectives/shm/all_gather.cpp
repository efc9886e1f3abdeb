// All-gather and gather in shared memory: every rank streams its block (a
// chunk at a time) into its buffer; every rank (gather: the root) copies
// every buffer to its place in the output. From kSingleCopyMinBlock, where
// the world can, each reads the others' blocks straight from their memory.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

namespace {

// Single copy: every rank posts where its block is; each reads every peer's
// block straight into its output, then waits until everyone has read its own.
void single_copy_all_gather(const ShmCtx& c, const Fingerprint& fp, bool want) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const std::size_t block = d.bytes();
  const std::uint64_t s = w.next_step();
  const auto at = reinterpret_cast<std::uintptr_t>(in);
  std::memcpy(w.small(me, s), &at, sizeof at);
  w.post_ready(s, fp);
  w.wait_ready(s, fp, c.dl);
  if (want) {
    for (int r = 0; r < n; ++r) {
      std::uint8_t* dst = out + block * static_cast<std::size_t>(r);
      if (r == me) {
        if (in != dst) std::memcpy(dst, in, block);
        continue;
      }
      std::uintptr_t theirs = 0;
      std::memcpy(&theirs, w.small(r, s), sizeof theirs);
      w.read_peer(r, theirs, dst, block);
    }
  }
  w.post_read(s);
  w.wait_read(s, fp, c.dl);
}

}  // namespace

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
  // Every rank has the same block size, so all decide alike.
  if (n > 1 && block >= kSingleCopyMinBlock && w.single_copy(fp, c.dl)) {
    single_copy_all_gather(c, fp, want);
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
