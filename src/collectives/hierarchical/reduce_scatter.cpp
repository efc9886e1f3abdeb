#include <cstring>

#include "collectives/hierarchical/steps.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/select.hpp"

namespace mci::coll {

// Reduce-scatter: rank r's output is the reduction of block r over every
// rank's input.
void hierarchical_reduce_scatter(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const HostMap& hosts = c.hosts;
  const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;
  const int me = c.t.rank(), h = hosts.host_of(me), n = c.t.size();
  const bool leader = me == hosts.leaders()[h];
  const std::size_t block = d.bytes(), all = block * static_cast<std::size_t>(n);
  const auto off = hier::host_offsets(hosts);
  const std::size_t mine = off[h + 1] - off[h];  // blocks of this host's ranks
  // [the host's sum, rank order | the same in host order | what the other
  // leaders send for this host's blocks, host after host]
  std::uint8_t* sum = c.packed.get(2 * all + static_cast<std::size_t>(hosts.hosts()) * mine * block);
  std::uint8_t* packed = sum + all;
  std::uint8_t* partials = packed + all;

  // 1. Inside each host: the sum of every block at the leader.
  CollectiveDesc r = hier::phase(d, d.count * static_cast<std::size_t>(n), 0, d.in, sum, Algo::unset);
  r.op = op;
  hier::host_reduce(c, r);

  // 2. Between leaders: each host's blocks to its leader, reduced there.
  if (leader) {
    for (int g = 0; g < hosts.hosts(); ++g) hier::pack_host(hosts, g, sum, packed + off[g] * block, block);
    const Fingerprint fp = d.fingerprint();
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g == h) continue;
      const int peer = hosts.leaders()[g];
      c.t.post_send(peer, fp, packed + off[g] * block, (off[g + 1] - off[g]) * block);
      c.t.post_recv(peer, fp, partials + static_cast<std::size_t>(g) * mine * block, mine * block);
    }
    c.t.wait_all(c.dl);
    // In host order, the same on every leader: every rank's bits agree.
    std::uint8_t* result = packed + off[h] * block;
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g != h)
        reduce_into(result, partials + static_cast<std::size_t>(g) * mine * block, mine * d.count, d.dtype, op);
    }
  }

  // 3. Inside each host: each rank's block from the leader.
  hier::on_host_or_copy(c, hier::phase(d, d.count, 0, packed + off[h] * block, d.out, Algo::shm_staged), shm_scatter);
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, n);
}

}  // namespace mci::coll
