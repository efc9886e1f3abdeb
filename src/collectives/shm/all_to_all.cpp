// All-to-all in shared memory: per chunk, every rank streams the chunk of
// each block it sends to another rank into its buffer; rank r copies piece r
// of every other buffer into its output, and its own block straight across.
#include <cstring>

#include "collectives/kernels/copy.hpp"
#include "collectives/shm/algorithms.hpp"
#include "common/byte_ranges.hpp"

namespace mci::coll {

void shm_all_to_all(const ShmCtx& c) {
  const auto& d = c.d;
  auto& w = c.w;
  const int n = w.size(), me = w.rank();
  const std::size_t es = dtype_size(d.dtype);
  const Fingerprint fp = d.fingerprint();
  auto* out = static_cast<std::uint8_t*>(d.out);
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  const std::size_t block = d.bytes();
  const std::size_t piece = std::max<std::size_t>(w.buffer_bytes() / (static_cast<std::size_t>(n) * es), 1);
  const std::size_t total = block * static_cast<std::size_t>(n);
  // Single copy needs every input untouched until every peer has read it,
  // so no rank in place (every rank decides on the size alone, so one whose
  // buffers overlap still takes part, and says no).
  if (single_copy_size(c, block, fp) &&
      single_copy_step(c, fp, in, !ranges_overlap(in, total, out, total), [&](const std::vector<std::uintptr_t>& at) {
        // Rank me reads block me of every peer's input.
        for (int r = 0; r < n; ++r) {
          std::uint8_t* dst = out + block * static_cast<std::size_t>(r);
          if (r == me) {
            std::memcpy(dst, in + block * static_cast<std::size_t>(me), block);
          } else {
            w.read_peer(r, at[static_cast<std::size_t>(r)] + block * static_cast<std::size_t>(me), dst, block);
          }
        }
      })) {
    return;
  }
  // An input that overlaps the output (other than exactly, in place) is
  // copied aside: the output's blocks are written while the input is read.
  if (in != out && ranges_overlap(in, total, out, total)) {
    std::uint8_t* copy = c.scratch.get(total);
    std::memcpy(copy, in, total);
    in = copy;
  }
  const Chunks chunks{d.count, piece};
  for (std::size_t k = 0; k < chunks.count(); ++k) {
    const std::size_t off = chunks.begin(k) * es, len = chunks.size(k) * es;
    shm_step(
        c, fp,
        [&](std::uint64_t s) {
          for (int b = 0; b < n; ++b) {
            if (b == me) continue;
            c.copier.copy(w.staging(me, s) + piece * es * static_cast<std::size_t>(b),
                          in + block * static_cast<std::size_t>(b) + off, len);
          }
        },
        [&](std::uint64_t s) {
          if (len == 0) return;
          for (int r = 0; r < n; ++r) {
            std::uint8_t* dst = out + block * static_cast<std::size_t>(r) + off;
            if (r != me) {
              std::memcpy(dst, w.staging(r, s) + piece * es * static_cast<std::size_t>(me), len);
            } else if (const std::uint8_t* src = in + block * static_cast<std::size_t>(me) + off; src != dst) {
              std::memmove(dst, src, len);
            }
          }
        });
  }
}

}  // namespace mci::coll
