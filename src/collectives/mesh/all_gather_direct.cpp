// Direct all-gather: every rank sends its block to every other rank.
#include <cstring>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_gather_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  std::uint8_t* out = static_cast<std::uint8_t*>(d.out);
  if (d.in != out + bytes * r && bytes) std::memcpy(out + bytes * r, d.in, bytes);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    t.post_send(p, fp, out + bytes * r, bytes);
    t.post_recv(p, fp, out + bytes * p, bytes);
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
