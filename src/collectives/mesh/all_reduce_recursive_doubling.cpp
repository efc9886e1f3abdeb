// Recursive doubling: log2(n) rounds, each an exchange of the whole buffer
// with the partner whose rank differs in one bit. For n not a power of two,
// the first 2*rem ranks pair up first (even sends to odd) and the evens get
// the result back at the end. Both partners compute a op b on the same
// operands, and IEEE operations commute, so every rank ends with the same bits.
#include <cstring>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void all_reduce_recursive_doubling(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t bytes = d.bytes();
  if (d.in != d.out && bytes) std::memcpy(d.out, d.in, bytes);
  if (n > 1) {
    const Fingerprint fp = d.fingerprint();
    std::uint8_t* tmp = c.scratch.get(bytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int rem = n - p;

    int vrank;
    if (r < 2 * rem) {
      if (r % 2 == 0) {
        t.post_send(r + 1, fp, d.out, bytes);
        t.wait_all(c.dl);
        vrank = -1;
      } else {
        t.post_recv(r - 1, fp, tmp, bytes);
        t.wait_all(c.dl);
        reduce_into(d.out, tmp, d.count, d.dtype, d.op);
        vrank = r / 2;
      }
    } else {
      vrank = r - rem;
    }

    if (vrank >= 0) {
      for (int mask = 1; mask < p; mask <<= 1) {
        const int vpartner = vrank ^ mask;
        const int partner = vpartner < rem ? vpartner * 2 + 1 : vpartner + rem;
        t.post_send(partner, fp, d.out, bytes);
        t.post_recv(partner, fp, tmp, bytes);
        t.wait_all(c.dl);
        reduce_into(d.out, tmp, d.count, d.dtype, d.op);
      }
    }

    if (r < 2 * rem) {
      if (r % 2 == 1) {
        t.post_send(r - 1, fp, d.out, bytes);
      } else {
        t.post_recv(r + 1, fp, d.out, bytes);
      }
      t.wait_all(c.dl);
    }
  }
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, n);
}

}  // namespace mci::coll
