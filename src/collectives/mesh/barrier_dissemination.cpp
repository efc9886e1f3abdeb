// Dissemination barrier: ceil(log2 n) rounds of empty frames; in round k
// rank r signals r + 2^k and waits for r - 2^k. No rank leaves before every
// rank has arrived.
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void barrier_dissemination(const Ctx& c) {
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const Fingerprint fp = c.d.fingerprint();
  for (int dist = 1; dist < n; dist <<= 1) {
    t.post_send(mod(r + dist, n), fp, nullptr, 0);
    t.post_recv(mod(r - dist, n), fp, nullptr, 0);
    t.wait_all(c.dl);
  }
}

}  // namespace mci::coll
