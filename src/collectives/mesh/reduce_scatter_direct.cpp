// Direct reduce-scatter: rank p receives block p from everyone and reduces
// the n blocks in rank order.
#include <cstring>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void reduce_scatter_direct(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  const auto* in = static_cast<const std::uint8_t*>(d.in);
  std::uint8_t* all = c.scratch.get(bytes * static_cast<std::size_t>(n));
  if (bytes) std::memcpy(all + bytes * r, in + bytes * r, bytes);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    t.post_send(p, fp, in + bytes * p, bytes);
    t.post_recv(p, fp, all + bytes * p, bytes);
  }
  t.wait_all(c.dl);
  fold_ranks(
      d.out, [&](int p) -> const void* { return all + bytes * p; }, n, d.count, d.dtype, d.op);
}

}  // namespace mci::coll
