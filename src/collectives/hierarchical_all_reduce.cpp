#include <cstring>

#include "collectives/hierarchical_steps.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/select.hpp"

namespace mci::coll {

void hierarchical_all_reduce(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  // avg: sums all the way, one division at the end on every rank (the same
  // bits everywhere, since every rank divides the same sum).
  const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;

  // 1. Inside the host: the host's result at its leader (local rank 0).
  if (c.local) {
    CollectiveDesc r = d;
    r.root = 0;
    r.op = op;
    r.algo = host_reduce_algo(d.bytes());
    hier::on_host(c, r, r.algo == Algo::shm_direct ? shm_reduce_direct : shm_reduce_sliced);
  } else if (d.in != d.out && d.bytes()) {
    std::memcpy(d.out, d.in, d.bytes());
  }

  // 2. Between hosts: the leaders all-reduce their hosts' results in place.
  CollectiveDesc a = d;
  a.in = a.out;
  a.op = op;
  hier::among(c, c.hosts.leaders(), a);

  // 3. Inside the host: the leader's result to every rank.
  CollectiveDesc b = d;
  b.root = 0;
  b.in = d.out;
  b.algo = Algo::shm_staged;
  hier::on_host(c, b, shm_broadcast);
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
}

}  // namespace mci::coll
