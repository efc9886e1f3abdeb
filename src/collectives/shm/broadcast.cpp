// Broadcast in shared memory: the root streams each chunk into its buffer;
// every other rank copies it out. From kSingleCopyMinBlock, where the world
// can, they read the root's buffer straight from its memory instead.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

void shm_broadcast(const ShmCtx& c) {
  const auto& d = c.d;
  auto& w = c.w;
  const int me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  if (me == d.root && in != out && d.bytes()) std::memcpy(out, in, d.bytes());
  // Single copy: every other rank reads the root's buffer straight into its
  // output. Only below kSingleCopyMaxBroadcast: above, staging keeps both
  // the root and the readers copying at once, chunk after chunk, where a
  // single copy leaves the root idle (2 ranks, 1 MiB: 62 us staged, 111 in
  // one copy; 256 KiB: 16 and 12).
  if (d.bytes() < kSingleCopyMaxBroadcast && single_copy_size(c, d.bytes(), fp) &&
      single_copy_step(c, fp, in, true, [&](const std::vector<std::uintptr_t>& at) {
        if (me != d.root) w.read_peer(d.root, at[static_cast<std::size_t>(d.root)], out, d.bytes());
      })) {
    return;
  }
  const Chunks chunks{d.count, w.buffer_bytes() / es};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k) * es, len = chunks.size(k) * es;
    shm_step(
        c, fp,
        [&](std::uint64_t s) {
          if (me == d.root) c.copier.copy(w.staging(me, s), in + off, len);
        },
        [&](std::uint64_t s) {
          if (me != d.root && len) std::memcpy(out + off, w.staging(d.root, s), len);
        });
  }
}

}  // namespace mci::coll
