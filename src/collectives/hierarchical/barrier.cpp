#include "collectives/hierarchical/steps.hpp"

namespace mci::coll {

// Leaving the leaders' barrier means every leader entered it, so every
// host's ranks had all arrived; the second host barrier passes that on.
void hierarchical_barrier(const HierCtx& c) {
  CollectiveDesc h = c.d;
  h.algo = Algo::shm_flags;
  hier::on_host(c, h, shm_barrier);
  hier::among(c, c.hosts.leaders(), c.d);
  hier::on_host(c, h, shm_barrier);
}

}  // namespace mci::coll
