#include <cstring>

#include "collectives/hierarchical/steps.hpp"

namespace mci::coll {

// Scatter: rank r's output is block r of the root's input.
void hierarchical_scatter(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const HostMap& hosts = c.hosts;
  const int me = c.t.rank(), h = hosts.host_of(me);
  const std::vector<int> delegates = hosts.delegates(d.root);
  const int delegate = delegates[static_cast<std::size_t>(h)];
  const std::size_t block = d.bytes();
  const auto off = hier::host_offsets(hosts);
  std::uint8_t* packed = c.packed.get(static_cast<std::size_t>(c.t.size()) * block);

  // 1. Between hosts: each host's blocks from the root to its delegate.
  const Fingerprint fp = d.fingerprint();
  if (me == d.root) {
    const auto* in = static_cast<const std::uint8_t*>(d.in);
    for (int g = 0; g < hosts.hosts(); ++g) {
      hier::pack_host(hosts, g, in, packed + off[g] * block, block);
      if (g != h)
        c.t.post_send(delegates[static_cast<std::size_t>(g)], fp, packed + off[g] * block,
                      (off[g + 1] - off[g]) * block);
    }
    c.t.wait_all(c.dl);
  } else if (me == delegate) {
    c.t.post_recv(d.root, fp, packed + off[h] * block, (off[h + 1] - off[h]) * block);
    c.t.wait_all(c.dl);
  }

  // 2. Inside each host: from its delegate, one block to each rank.
  hier::on_host_or_copy(c,
                        hier::phase(d, d.count, hosts.local_of(delegate), packed + off[h] * block, d.out,
                                    Algo::shm_staged),
                        shm_scatter);
}

}  // namespace mci::coll
