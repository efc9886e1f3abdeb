#include <cstring>

#include "collectives/hierarchical/steps.hpp"

namespace mci::coll {

// All-to-all: block s of rank r's output is block r of rank s's input. The
// leader of host h holds every input of its host (rows: its ranks, columns:
// destinations); to the leader of host g it sends the columns of g's ranks,
// and from it receives the rows of g's ranks restricted to h's columns.
void hierarchical_all_to_all(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  const HostMap& hosts = c.hosts;
  const int me = c.t.rank(), h = hosts.host_of(me), n = c.t.size();
  const std::size_t block = d.bytes(), row = block * static_cast<std::size_t>(n);
  const auto& here = hosts.members(h);
  const std::size_t m = here.size();
  const std::size_t across = m * (static_cast<std::size_t>(n) - m) * block;  // to or from other hosts
  // [this host's inputs, a row per rank | blocks to other hosts | blocks
  //  from other hosts | this host's outputs, a row per rank]
  std::uint8_t* inputs = c.packed.get(2 * m * row + 2 * across);
  std::uint8_t* send = inputs + m * row;
  std::uint8_t* recv = send + across;
  std::uint8_t* outputs = recv + across;

  // 1. Inside each host: every input at the leader.
  hier::on_host_or_copy(c, hier::phase(d, d.count * static_cast<std::size_t>(n), 0, d.in, inputs, Algo::shm_staged),
                        shm_all_gather);

  if (me == hosts.leaders()[h]) {
    // 2. Between leaders. Outgoing to host g: for each of our ranks i, its
    // blocks for g's ranks; incoming from g: for each of g's ranks, its
    // blocks for our ranks.
    const Fingerprint fp = d.fingerprint();
    std::size_t sent = 0, got = 0;
    std::vector<std::size_t> from(static_cast<std::size_t>(hosts.hosts()));
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g == h) continue;
      const auto& there = hosts.members(g);
      const std::size_t k = there.size();
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < k && block; ++j) {
          std::memcpy(send + sent + (i * k + j) * block, inputs + i * row + static_cast<std::size_t>(there[j]) * block,
                      block);
        }
      }
      c.t.post_send(hosts.leaders()[g], fp, send + sent, m * k * block);
      c.t.post_recv(hosts.leaders()[g], fp, recv + got, k * m * block);
      from[static_cast<std::size_t>(g)] = got;
      sent += m * k * block;
      got += k * m * block;
    }
    // Blocks between our own ranks meanwhile.
    for (std::size_t j = 0; j < m && block; ++j) {
      for (std::size_t i = 0; i < m; ++i) {
        std::memcpy(outputs + j * row + static_cast<std::size_t>(here[i]) * block,
                    inputs + i * row + static_cast<std::size_t>(here[j]) * block, block);
      }
    }
    c.t.wait_all(c.dl);
    for (int g = 0; g < hosts.hosts(); ++g) {
      if (g == h) continue;
      const auto& there = hosts.members(g);
      const std::size_t k = there.size();
      const std::uint8_t* src = recv + from[static_cast<std::size_t>(g)];
      for (std::size_t i = 0; i < k && block; ++i) {
        for (std::size_t j = 0; j < m; ++j) {
          std::memcpy(outputs + j * row + static_cast<std::size_t>(there[i]) * block, src + (i * m + j) * block, block);
        }
      }
    }
  }

  // 3. Inside each host: each rank's output row from the leader.
  hier::on_host_or_copy(c, hier::phase(d, d.count * static_cast<std::size_t>(n), 0, outputs, d.out, Algo::shm_staged),
                        shm_scatter);
}

}  // namespace mci::coll
