// Ring all-gather: n-1 steps; at step s each rank passes on the block it
// received at step s-1 (its own at step 0), chunk by chunk.
#include <cstring>
#include <vector>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_gather_ring(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  const std::size_t bytes = d.bytes();
  std::uint8_t* mine = at(d.out, d.count * r, es);
  if (d.in != mine && bytes) std::memcpy(mine, d.in, bytes);
  if (n == 1) return;
  const Fingerprint fp = d.fingerprint();
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  const Chunks ch{d.count, std::max<std::size_t>(1, kPipelineChunkBytes / es)};

  for (std::size_t i = 0; i < ch.count(); ++i) {
    t.post_send(next, fp, mine + ch.begin(i) * es, ch.size(i) * es);
  }
  std::vector<transport::OpHandle> hs;
  for (int s = 0; s < n - 1; ++s) {
    std::uint8_t* block = at(d.out, d.count * mod(r - s - 1, n), es);
    hs.clear();
    for (std::size_t i = 0; i < ch.count(); ++i) {
      hs.push_back(t.post_recv(prev, fp, block + ch.begin(i) * es, ch.size(i) * es));
    }
    for (std::size_t i = 0; i < ch.count(); ++i) {
      t.wait(hs[i], c.dl);
      if (s < n - 2) t.post_send(next, fp, block + ch.begin(i) * es, ch.size(i) * es);
    }
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
