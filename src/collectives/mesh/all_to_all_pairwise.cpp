// All-to-all: block p of the input goes to rank p, block p of the output
// comes from rank p. Every exchange is posted at once; the transport moves
// them together. An input that overlaps the output is copied aside first.
#include <cstring>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_to_all_pairwise(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const std::size_t total = bytes * static_cast<std::size_t>(n);
  const Fingerprint fp = d.fingerprint();
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  auto* out = static_cast<std::uint8_t*>(d.out);
  if (total && in < out + total && out < in + total) {
    std::uint8_t* copy = c.scratch.get(total);
    std::memcpy(copy, in, total);
    in = copy;
  }
  if (bytes) std::memcpy(out + bytes * r, in + bytes * r, bytes);
  for (int s = 1; s < n; ++s) {
    const int to = mod(r + s, n), from = mod(r - s, n);
    t.post_send(to, fp, in + bytes * to, bytes);
    t.post_recv(from, fp, out + bytes * from, bytes);
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
