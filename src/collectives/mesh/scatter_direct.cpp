// Scatter: the root sends block p of its input to rank p.
#include <cstring>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void scatter_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  if (r != d.root) {
    t.post_recv(d.root, fp, d.out, bytes);
  } else {
    const std::uint8_t* in = static_cast<const std::uint8_t*>(d.in);
    for (int p = 0; p < n; ++p) {
      if (p != r) t.post_send(p, fp, in + bytes * p, bytes);
    }
    if (d.out != in + bytes * r && bytes) std::memcpy(d.out, in + bytes * r, bytes);
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
