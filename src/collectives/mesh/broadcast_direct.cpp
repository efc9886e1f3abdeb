// Direct broadcast: the root sends the whole buffer to every rank.
#include <cstring>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void broadcast_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const Fingerprint fp = d.fingerprint();
  if (r == d.root) {
    if (d.in != d.out && d.bytes()) std::memcpy(d.out, d.in, d.bytes());
    for (int p = 0; p < n; ++p) {
      if (p != r) t.post_send(p, fp, d.in, d.bytes());
    }
  } else {
    t.post_recv(d.root, fp, d.out, d.bytes());
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
