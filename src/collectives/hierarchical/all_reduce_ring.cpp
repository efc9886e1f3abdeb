// Large all-reduces across three hosts or more: the ring all-reduce between
// the hosts' leaders with the host phases folded in block by block. A
// block's host sum is made in shared memory just before the ring needs it,
// while the previous block is on the wire, and each block is handed out to
// the host as soon as it is complete at the leader, while the next one
// arrives. Every rank of every host follows the same order of blocks (it
// depends only on the host's place in the ring), and each block is reduced
// once, in ring order, then copied: every rank ends with the same bits.
#include "collectives/hierarchical/steps.hpp"
#include "collectives/kernels/reduce.hpp"

namespace mci::coll::hier {

void all_reduce_ring_of_hosts(const HierCtx& c, ReduceOp op) {
  const CollectiveDesc& d = c.d;
  auto& t = c.t;
  const std::size_t es = dtype_size(d.dtype);
  const int n = c.hosts.hosts();
  const int me = t.rank(), i = c.hosts.host_of(me);
  const std::vector<int>& leaders = c.hosts.leaders();
  const bool leader = me == leaders[static_cast<std::size_t>(i)];
  const int next = leaders[static_cast<std::size_t>(mod(i + 1, n))];
  const int prev = leaders[static_cast<std::size_t>(mod(i - 1, n))];
  const Blocks blocks{d.count, n};
  const std::size_t chunk = std::max<std::size_t>(1, kPipelineChunkBytes / es);
  const Fingerprint fp = d.fingerprint();
  std::uint8_t* tmp = leader ? c.packed.get(blocks.size(0) * es) : nullptr;
  std::vector<transport::OpHandle> handles;

  auto block_at = [&](int b, std::size_t elem) { return at(d.out, blocks.offset(b) + elem, es); };
  auto host_sum = [&](int b) {
    CollectiveDesc r = phase(d, blocks.size(b), 0, at(d.in, blocks.offset(b), es), block_at(b, 0), Algo::unset);
    r.op = op;
    host_reduce(c, r);
  };
  auto hand_out = [&](int b) {
    on_host(c, phase(d, blocks.size(b), 0, block_at(b, 0), block_at(b, 0), Algo::shm_staged), shm_broadcast);
  };
  // Queues the block's chunks and pushes what the socket takes now, so the
  // wire stays busy while this rank works in shared memory.
  auto send_block = [&](int b) {
    const Chunks ch{blocks.size(b), chunk};
    for (std::size_t k = 0; k < ch.count(); ++k) t.post_send(next, fp, block_at(b, ch.begin(k)), ch.size(k) * es);
    t.progress(std::chrono::milliseconds(0), c.dl);
  };

  // Reduce-scatter: at step s the ring brings block i-s-1, reduced into
  // this host's sum of it and passed on chunk by chunk.
  host_sum(i);
  if (leader) send_block(i);
  for (int s = 0; s < n - 1; ++s) {
    const int b = mod(i - s - 1, n);
    host_sum(b);
    if (!leader) continue;
    const Chunks ch{blocks.size(b), chunk};
    handles.clear();
    for (std::size_t k = 0; k < ch.count(); ++k) {
      handles.push_back(t.post_recv(prev, fp, tmp + ch.begin(k) * es, ch.size(k) * es));
    }
    for (std::size_t k = 0; k < ch.count(); ++k) {
      t.wait(handles[k], c.dl);
      reduce_into(block_at(b, ch.begin(k)), tmp + ch.begin(k) * es, ch.size(k), d.dtype, op);
      if (s < n - 2) t.post_send(next, fp, block_at(b, ch.begin(k)), ch.size(k) * es);
    }
  }
  if (leader) t.wait_all(c.dl);

  // All-gather: block i+1 is complete here; the others arrive one by one,
  // each handed to the host while the next is on the wire.
  const int done = mod(i + 1, n);
  if (leader) send_block(done);
  hand_out(done);
  for (int s = 0; s < n - 1; ++s) {
    const int b = mod(i - s, n);
    if (leader) {
      const Chunks ch{blocks.size(b), chunk};
      handles.clear();
      for (std::size_t k = 0; k < ch.count(); ++k) {
        handles.push_back(t.post_recv(prev, fp, block_at(b, ch.begin(k)), ch.size(k) * es));
      }
      for (std::size_t k = 0; k < ch.count(); ++k) {
        t.wait(handles[k], c.dl);
        if (s < n - 2) t.post_send(next, fp, block_at(b, ch.begin(k)), ch.size(k) * es);
      }
    }
    hand_out(b);
  }
  if (leader) t.wait_all(c.dl);
}

}  // namespace mci::coll::hier
