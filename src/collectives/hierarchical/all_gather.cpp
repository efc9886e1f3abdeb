#include <cstring>

#include "collectives/hierarchical/steps.hpp"

namespace mci::coll {

// All-gather: block r of every rank's output is rank r's input.
void hierarchical_all_gather(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const HostMap& hosts = c.hosts;
  const int me = c.t.rank(), h = hosts.host_of(me);
  const std::size_t block = d.bytes();
  const auto off = hier::host_offsets(hosts);
  const int n = c.t.size();
  auto* out = static_cast<std::uint8_t*>(d.out);

  // 1. Inside each host: the host's blocks at the leader (in host order).
  std::uint8_t* packed = c.packed.get(static_cast<std::size_t>(n) * block);
  hier::on_host_or_copy(c, hier::phase(d, d.count, 0, d.in, packed + off[h] * block, Algo::shm_staged), shm_all_gather);

  // 2. Between leaders: every host's blocks to every leader.
  if (me == hosts.leaders()[h]) {
    const Fingerprint fp = d.fingerprint();
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g == h) continue;
      const int peer = hosts.leaders()[g];
      c.t.post_send(peer, fp, packed + off[h] * block, (off[h + 1] - off[h]) * block);
      c.t.post_recv(peer, fp, packed + off[g] * block, (off[g + 1] - off[g]) * block);
    }
    c.t.wait_all(c.dl);
    for (int g = 0; g < hosts.hosts(); ++g) hier::unpack_host(hosts, g, packed + off[g] * block, out, block);
  }

  // 3. Inside each host: the whole result from the leader.
  hier::on_host(c, hier::phase(d, d.count * static_cast<std::size_t>(n), 0, d.out, d.out, Algo::shm_staged),
                shm_broadcast);
}

// Gather: the root's output holds every rank's block, in rank order.
void hierarchical_gather(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const HostMap& hosts = c.hosts;
  const int me = c.t.rank(), h = hosts.host_of(me);
  const std::vector<int> delegates = hosts.delegates(d.root);
  const std::size_t block = d.bytes();
  const auto off = hier::host_offsets(hosts);
  std::uint8_t* packed = c.packed.get(static_cast<std::size_t>(c.t.size()) * block);

  // 1. Inside each host: its blocks at its delegate.
  hier::on_host_or_copy(c,
                        hier::phase(d, d.count, hosts.local_of(delegates[static_cast<std::size_t>(h)]), d.in,
                                    packed + off[h] * block, Algo::shm_staged),
                        shm_all_gather);

  // 2. Between hosts: each delegate's blocks to the root.
  const Fingerprint fp = d.fingerprint();
  if (me == d.root) {
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g == h) continue;
      c.t.post_recv(delegates[static_cast<std::size_t>(g)], fp, packed + off[g] * block, (off[g + 1] - off[g]) * block);
    }
    c.t.wait_all(c.dl);
    for (int g = 0; g < hosts.hosts(); ++g) {
      hier::unpack_host(hosts, g, packed + off[g] * block, static_cast<std::uint8_t*>(d.out), block);
    }
  } else if (me == delegates[static_cast<std::size_t>(h)]) {
    c.t.post_send(d.root, fp, packed + off[h] * block, (off[h + 1] - off[h]) * block);
    c.t.wait_all(c.dl);
  }
}

}  // namespace mci::coll
