#include "collectives/hierarchical_steps.hpp"

namespace mci::coll {

void hierarchical_broadcast(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const std::vector<int> delegates = c.hosts.delegates(d.root);
  const int me = c.t.rank();
  const int delegate = delegates[static_cast<std::size_t>(c.hosts.host_of(me))];

  // 1. Between hosts: from the root to every other host's delegate.
  CollectiveDesc a = d;
  a.root = c.hosts.host_of(d.root);
  if (me != d.root) a.in = d.out;
  hier::among(c, delegates, a);

  // 2. Inside each host: from its delegate (the root on the root's host).
  CollectiveDesc b = d;
  b.root = c.hosts.local_of(delegate);
  b.in = d.out;
  b.algo = Algo::shm_staged;
  hier::on_host(c, b, shm_broadcast);
}

}  // namespace mci::coll
