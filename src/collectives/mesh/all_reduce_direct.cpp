// Direct all-reduce: every rank sends its buffer to every other rank and
// reduces all n buffers itself, in rank order (so all ranks agree bit for
// bit). One round trip; n-1 copies of the data per rank: small buffers only.
#include <cstring>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_reduce_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  std::uint8_t* all = c.scratch.get(bytes * static_cast<std::size_t>(n));
  if (bytes) std::memcpy(all + bytes * r, d.in, bytes);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    t.post_send(p, fp, all + bytes * r, bytes);
    t.post_recv(p, fp, all + bytes * p, bytes);
  }
  t.wait_all(c.dl);
  fold_ranks(
      d.out, [&](int p) -> const void* { return all + bytes * p; }, n, d.count, d.dtype, d.op);
}

}  // namespace mci::coll
