#include <cstring>
#include <vector>

#include "collectives/hierarchical/steps.hpp"

namespace mci::coll {

namespace {

// The delegates' binomial tree, rooted at the root's host, as group ranks.
TreeLinks delegates_tree(const std::vector<int>& delegates, int me_index, int root_index) {
  TreeLinks links = binomial_tree(me_index, root_index, static_cast<int>(delegates.size()));
  if (links.parent >= 0) links.parent = delegates[static_cast<std::size_t>(links.parent)];
  for (int& child : links.children) child = delegates[static_cast<std::size_t>(child)];
  return links;
}

}  // namespace

void hierarchical_broadcast(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const std::vector<int> delegates = c.hosts.delegates(d.root);
  const int me = c.t.rank(), h = c.hosts.host_of(me);
  const int delegate = delegates[static_cast<std::size_t>(h)];
  const std::size_t es = dtype_size(d.dtype);
  if (me == d.root && d.in != d.out && d.bytes()) std::memcpy(d.out, d.in, d.bytes());

  // Small messages: between delegates with the flat algorithm, then in one
  // piece inside each host.
  // Large ones in pieces: a delegate hands piece k to its host while piece
  // k+1 is still on the wire.
  const std::size_t piece = hier::pipelined(d.bytes()) ? hier::kPieceBytes / es : std::max<std::size_t>(d.count, 1);
  const Chunks pieces{d.count, piece};
  TreeLinks links;
  std::vector<transport::OpHandle> arriving;
  const Fingerprint fp = d.fingerprint();
  if (pieces.count() == 1) {
    CollectiveDesc a = d;
    a.root = c.hosts.host_of(d.root);
    a.in = d.out;
    hier::among(c, delegates, a);
  } else if (me == delegate) {
    links = delegates_tree(delegates, h, c.hosts.host_of(d.root));
    for (std::size_t k = 0; links.parent >= 0 && k < pieces.count(); ++k) {
      arriving.push_back(c.t.post_recv(links.parent, fp, at(d.out, pieces.begin(k), es), pieces.size(k) * es));
    }
  }

  for (std::size_t k = 0; k < pieces.count(); ++k) {
    if (pieces.count() > 1 && me == delegate) {
      if (links.parent >= 0) c.t.wait(arriving[k], c.dl);
      for (int child : links.children) c.t.post_send(child, fp, at(d.out, pieces.begin(k), es), pieces.size(k) * es);
    }
    // Inside each host: from its delegate (the root on the root's host).
    std::uint8_t* piece = at(d.out, pieces.begin(k), es);
    hier::on_host(c, hier::phase(d, pieces.size(k), c.hosts.local_of(delegate), piece, piece, Algo::shm_staged),
                  shm_broadcast);
    // Keep the sends moving while this rank works inside its host.
    if (pieces.count() > 1 && me == delegate && !links.children.empty())
      c.t.progress(std::chrono::milliseconds(0), c.dl);
  }
  if (me == delegate) c.t.wait_all(c.dl);
}

}  // namespace mci::coll
