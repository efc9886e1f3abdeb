// Ring all-reduce: a reduce-scatter then an all-gather around the ring, each
// block cut into chunks so a chunk is reduced (or forwarded) while the next
// ones are still on the wire. Every rank ends with identical bits: each block
// is reduced once, in ring order, then copied around.
#include <cstring>
#include <vector>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_reduce_ring(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  if (d.in != d.out && d.bytes()) std::memcpy(d.out, d.in, d.bytes());
  if (n == 1) return;
  const Fingerprint fp = d.fingerprint();
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const Blocks blocks{d.count, n};
  const std::size_t chunk = std::max<std::size_t>(1, kPipelineChunkBytes / es);
  std::uint8_t* tmp = c.scratch.get(blocks.size(0) * es);
  std::vector<transport::OpHandle> handles;

  auto send_block = [&](int b) {
    const Chunks ch{blocks.size(b), chunk};
    for (std::size_t i = 0; i < ch.count(); ++i) {
      t.post_send(next, fp, at(d.out, blocks.offset(b) + ch.begin(i), es), ch.size(i) * es);
    }
  };

  // Reduce-scatter: at step s send block r-s, receive block r-s-1, reduce it
  // into ours chunk by chunk and pass each chunk on as soon as it is done.
  send_block(r);
  for (int s = 0; s < n - 1; ++s) {
    const int b = mod(r - s - 1, n);
    const Chunks ch{blocks.size(b), chunk};
    handles.clear();
    for (std::size_t i = 0; i < ch.count(); ++i) {
      handles.push_back(t.post_recv(prev, fp, tmp + ch.begin(i) * es, ch.size(i) * es));
    }
    for (std::size_t i = 0; i < ch.count(); ++i) {
      std::uint8_t* mine = at(d.out, blocks.offset(b) + ch.begin(i), es);
      t.wait(handles[i], c.dl);
      reduce_into(mine, tmp + ch.begin(i) * es, ch.size(i), d.dtype, d.op);
      if (s < n - 2) t.post_send(next, fp, mine, ch.size(i) * es);
    }
  }
  t.wait_all(c.dl);

  // Rank r now holds the fully reduced block r+1.
  const int done = mod(r + 1, n);
  if (d.op == ReduceOp::avg) {
    finish_avg(at(d.out, blocks.offset(done), es), blocks.size(done), d.dtype, n);
  }

  // All-gather: at step s send block r+1-s, receive block r-s, forward it.
  send_block(done);
  for (int s = 0; s < n - 1; ++s) {
    const int b = mod(r - s, n);
    const Chunks ch{blocks.size(b), chunk};
    handles.clear();
    for (std::size_t i = 0; i < ch.count(); ++i) {
      handles.push_back(t.post_recv(prev, fp, at(d.out, blocks.offset(b) + ch.begin(i), es), ch.size(i) * es));
    }
    for (std::size_t i = 0; i < ch.count(); ++i) {
      t.wait(handles[i], c.dl);
      if (s < n - 2) {
        t.post_send(next, fp, at(d.out, blocks.offset(b) + ch.begin(i), es), ch.size(i) * es);
      }
    }
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
