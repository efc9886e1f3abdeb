// Ring reduce-scatter: n-1 steps; at step s rank r sends its running partial
// of block r-s-1 and receives the partial of block r-s-2, adds its own input
// to it, and passes it on. After the last step it holds block r, reduced.
// The input is never written; partials live in two alternating scratch
// blocks (a block is reused only once its previous send has left).
#include <cstring>
#include <vector>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void reduce_scatter_ring(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  const Chunks ch{d.count, std::max<std::size_t>(1, kPipelineChunkBytes / es)};
  auto in_block = [&](int b) { return at(d.in, d.count * mod(b, n), es); };

  std::uint8_t* space = c.scratch.get(3 * bytes);
  std::uint8_t* partial[2] = {space, space + bytes};
  std::uint8_t* tmp = space + 2 * bytes;
  std::vector<transport::OpHandle> sent[2];
  std::vector<transport::OpHandle> hs;
  const int next = mod(r + 1, n), prev = mod(r - 1, n);

  if (n == 1) {
    if (d.out != d.in && bytes) std::memmove(d.out, d.in, bytes);
  } else {
    for (std::size_t i = 0; i < ch.count(); ++i) {
      t.post_send(next, fp, in_block(r - 1) + ch.begin(i) * es, ch.size(i) * es);
    }
  }
  for (int s = 0; s < n - 1; ++s) {
    const bool last = s == n - 2;
    const std::uint8_t* own = in_block(r - s - 2);
    std::uint8_t* dst = last ? static_cast<std::uint8_t*>(d.out) : partial[s % 2];
    hs.clear();
    for (std::size_t i = 0; i < ch.count(); ++i) {
      hs.push_back(t.post_recv(prev, fp, tmp + ch.begin(i) * es, ch.size(i) * es));
    }
    auto& reuse = sent[s % 2];
    for (std::size_t i = 0; i < ch.count(); ++i) {
      const std::size_t off = ch.begin(i) * es;
      t.wait(hs[i], c.dl);
      if (!last && i < reuse.size()) t.wait(reuse[i], c.dl);
      reduce_to(dst + off, own + off, tmp + off, ch.size(i), d.dtype, d.op);
      if (!last) {
        auto h = t.post_send(next, fp, dst + off, ch.size(i) * es);
        if (i < reuse.size())
          reuse[i] = h;
        else
          reuse.push_back(h);
      }
    }
  }
  t.wait_all(c.dl);
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, n);
}

}  // namespace mci::coll
