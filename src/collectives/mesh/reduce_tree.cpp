// Binomial-tree reduce toward the root. Each rank reduces its children's
// partial results into its own, in a fixed order, then sends to its parent.
// Only the root's output is written; other ranks work in scratch memory.
#include <cstring>
#include <vector>

#include "collectives/kernels/reduce.hpp"
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void reduce_tree(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const int v = mod(r - d.root, n);
  const std::size_t bytes = d.bytes();
  const Fingerprint fp = d.fingerprint();
  std::uint8_t* space = c.scratch.get(2 * bytes);
  std::uint8_t* acc = r == d.root ? static_cast<std::uint8_t*>(d.out) : space;
  std::uint8_t* tmp = space + bytes;
  if (acc != d.in && bytes) std::memmove(acc, d.in, bytes);

  // Children are v + 2^k for 2^k below v's lowest set bit, nearest first.
  int limit = 1;
  if (v == 0) {
    while (limit < n) limit <<= 1;
  } else {
    limit = v & -v;
  }
  for (int k = 1; k < limit; k <<= 1) {
    if (v + k >= n) break;
    t.post_recv(mod(v + k + d.root, n), fp, tmp, bytes);
    t.wait_all(c.dl);
    reduce_into(acc, tmp, d.count, d.dtype, d.op);
  }
  if (v != 0) {
    t.post_send(mod((v & (v - 1)) + d.root, n), fp, acc, bytes);
    t.wait_all(c.dl);
  } else if (d.op == ReduceOp::avg) {
    finish_avg(acc, d.count, d.dtype, n);
  }
}

}  // namespace mci::coll
