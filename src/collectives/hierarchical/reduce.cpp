#include <cstring>

#include "collectives/hierarchical/steps.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/select.hpp"

namespace mci::coll {

void hierarchical_reduce(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;
  const std::vector<int> delegates = c.hosts.delegates(d.root);
  const int me = c.t.rank();
  const int delegate = delegates[static_cast<std::size_t>(c.hosts.host_of(me))];
  // The host's result: in the root's output, in scratch at other delegates
  // (whose output the caller need not have given).
  void* sum = me == d.root ? d.out : me == delegate ? c.packed.get(d.bytes()) : d.out;

  // 1. Inside each host: the host's result at its delegate.
  CollectiveDesc r = hier::phase(d, d.count, c.hosts.local_of(delegate), d.in, sum, Algo::unset);
  r.op = op;
  hier::host_reduce(c, r);

  // 2. Between hosts: the delegates' results reduced at the root.
  CollectiveDesc a = d;
  a.root = c.hosts.host_of(d.root);
  a.op = op;
  a.in = sum;
  a.out = sum;
  hier::among(c, delegates, a);
  if (me == d.root && d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
}

}  // namespace mci::coll
