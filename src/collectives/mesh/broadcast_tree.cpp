// Binomial-tree broadcast, pipelined: each chunk is forwarded to the
// children as soon as it arrives from the parent. Ranks are renumbered so the
// root is virtual rank 0; children of v are v + 2^k for 2^k below v's lowest
// set bit, farthest first.
#include <cstring>
#include <vector>

#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

TreeLinks binomial_tree(int me, int root, int n) {
  const int v = mod(me - root, n);
  int limit = 1;  // v's lowest set bit; above every member for the root
  if (v == 0) {
    while (limit < n) limit <<= 1;
  } else {
    limit = v & -v;
  }
  TreeLinks out;
  for (int k = limit >> 1; k >= 1; k >>= 1) {
    if (v + k < n) out.children.push_back(mod(v + k + root, n));
  }
  if (v != 0) out.parent = mod((v & (v - 1)) + root, n);
  return out;
}

void broadcast_tree(const Ctx& c) {
  const auto& d = c.d;
  auto& t = c.t;
  const int n = t.size();
  const int r = t.rank();
  const std::size_t es = dtype_size(d.dtype);
  if (r == d.root && d.in != d.out && d.bytes()) std::memcpy(d.out, d.in, d.bytes());
  if (n == 1) return;
  const Fingerprint fp = d.fingerprint();
  const Chunks ch{d.count, std::max<std::size_t>(1, kPipelineChunkBytes / es)};

  const TreeLinks tree = binomial_tree(r, d.root, n);
  const std::vector<int>& children = tree.children;
  // The root sends from its input; the others forward from their output.
  const void* src = r == d.root ? d.in : d.out;
  if (tree.parent < 0) {
    for (std::size_t i = 0; i < ch.count(); ++i) {
      for (int child : children) t.post_send(child, fp, at(src, ch.begin(i), es), ch.size(i) * es);
    }
  } else {
    std::vector<transport::OpHandle> hs;
    for (std::size_t i = 0; i < ch.count(); ++i) {
      hs.push_back(t.post_recv(tree.parent, fp, at(d.out, ch.begin(i), es), ch.size(i) * es));
    }
    for (std::size_t i = 0; i < ch.count(); ++i) {
      t.wait(hs[i], c.dl);
      for (int child : children) t.post_send(child, fp, at(d.out, ch.begin(i), es), ch.size(i) * es);
    }
  }
  t.wait_all(c.dl);
}

}  // namespace mci::coll
