#include <algorithm>
#include <cstring>

#include "collectives/algorithm_table.hpp"
#include "collectives/hierarchical.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/select.hpp"
#include "collectives/shm_algorithms.hpp"
#include "transport/sub_transport.hpp"

namespace mci::coll {

void hierarchical_all_reduce(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  // avg: sums all the way, one division at the end on every rank (the same
  // bits everywhere, since every rank divides the same sum).
  const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;
  const bool leader = std::find(c.leaders.begin(), c.leaders.end(), c.t.rank()) != c.leaders.end();

  // The steps keep the caller's kind (all_reduce), so that errors and
  // mismatches name what the ranks called.
  // 1. Inside the host: the host's result at its leader (local rank 0).
  if (c.local) {
    CollectiveDesc r = d;
    r.root = 0;
    r.op = op;
    r.algo = host_reduce_algo(d.bytes());
    const ShmCtx host{*c.local, r, c.dl, c.scratch, c.copier};
    r.algo == Algo::shm_direct ? shm_reduce_direct(host) : shm_reduce_sliced(host);
  } else if (d.in != d.out && d.bytes()) {
    std::memcpy(d.out, d.in, d.bytes());
  }

  // 2. Between hosts: the leaders all-reduce their hosts' results in place.
  if (leader && c.leaders.size() > 1) {
    transport::SubTransport between(c.t, c.leaders);
    CollectiveDesc a = d;
    a.in = a.out;
    a.op = op;
    a.algo = select_algo(OpKind::all_reduce, a.bytes(), between.size(), std::nullopt);
    run_algorithm(Places{.mesh = &between}, a, c.dl, c.scratch);
  }

  // 3. Inside the host: the leader's result to every rank.
  if (c.local) {
    CollectiveDesc b = d;
    b.root = 0;
    b.in = d.out;
    b.algo = Algo::shm_staged;
    shm_broadcast(ShmCtx{*c.local, b, c.dl, c.scratch, c.copier});
  }
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
}

}  // namespace mci::coll
