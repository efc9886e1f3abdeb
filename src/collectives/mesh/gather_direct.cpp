// Gather: every rank sends its block to the root, which places it by rank.
#include <cstring>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void gather_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  if (r != d.root) {
    t.post_send(d.root, fp, d.in, bytes);
  } else {
    std::uint8_t* out = static_cast<std::uint8_t*>(d.out);
    if (d.in != out + bytes * r && bytes) std::memcpy(out + bytes * r, d.in, bytes);
    for (int p = 0; p < n; ++p) {
      if (p != r) t.post_recv(p, fp, out + bytes * p, bytes);
    }
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
