#include "collectives/hierarchical/steps.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/algorithm_table.hpp"
#include "collectives/select.hpp"
#include "transport/sub_transport.hpp"

namespace mci::coll {

HostMap::HostMap(std::vector<std::vector<int>> ranks_by_host) : members_(std::move(ranks_by_host)) {
  int n = 0;
  for (const auto& m : members_) n += static_cast<int>(m.size());
  host_of_.assign(static_cast<std::size_t>(n), -1);
  local_of_.assign(static_cast<std::size_t>(n), -1);
  for (int h = 0; h < hosts(); ++h) {
    const auto& m = members(h);
    leaders_.push_back(m.front());
    for (std::size_t i = 0; i < m.size(); ++i) {
      host_of_[static_cast<std::size_t>(m[i])] = h;
      local_of_[static_cast<std::size_t>(m[i])] = static_cast<int>(i);
    }
  }
}

std::vector<int> HostMap::delegates(int root) const {
  std::vector<int> out = leaders_;
  out[static_cast<std::size_t>(host_of(root))] = root;
  return out;
}

namespace hier {

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

CollectiveDesc phase(const CollectiveDesc& d, std::size_t count, int root, const void* in, void* out, Algo algo) {
  CollectiveDesc sub = d;
  sub.count = count;
  sub.root = root;
  sub.in = in;
  sub.out = out;
  sub.algo = algo;
  return sub;
}

void on_host(const HierCtx& c, const CollectiveDesc& sub, void (*algo)(const ShmCtx&)) {
  if (c.local) algo(ShmCtx{*c.local, sub, c.dl, c.scratch, c.copier});
}

void on_host_or_copy(const HierCtx& c, const CollectiveDesc& sub, void (*algo)(const ShmCtx&)) {
  if (c.local) {
    on_host(c, sub, algo);
  } else if (sub.in != sub.out && sub.bytes()) {
    std::memcpy(sub.out, sub.in, sub.bytes());
  }
}

void host_reduce(const HierCtx& c, CollectiveDesc sub) {
  sub.algo = shm_reduce_algo(sub.bytes());
  on_host_or_copy(c, sub, sub.algo == Algo::shm_direct ? shm_reduce_direct : shm_reduce_sliced);
}

void among(const HierCtx& c, const std::vector<int>& ranks, CollectiveDesc sub) {
  if (ranks.size() < 2 || !contains(ranks, c.t.rank())) return;
  transport::SubTransport between(c.t, ranks);
  sub.algo = select_algo(sub.kind, sub.bytes(), between.size(), std::nullopt);
  run_algorithm(Places{.mesh = &between}, sub, c.dl, c.scratch);
}

std::vector<std::size_t> host_offsets(const HostMap& hosts) {
  std::vector<std::size_t> off{0};
  for (int h = 0; h < hosts.hosts(); ++h) off.push_back(off.back() + hosts.members(h).size());
  return off;
}

void pack_host(const HostMap& hosts, int host, const std::uint8_t* ranked, std::uint8_t* packed, std::size_t block) {
  const auto& m = hosts.members(host);
  for (std::size_t i = 0; i < m.size() && block; ++i) {
    std::memcpy(packed + i * block, ranked + static_cast<std::size_t>(m[i]) * block, block);
  }
}

void unpack_host(const HostMap& hosts, int host, const std::uint8_t* packed, std::uint8_t* ranked, std::size_t block) {
  const auto& m = hosts.members(host);
  for (std::size_t i = 0; i < m.size() && block; ++i) {
    std::uint8_t* dst = ranked + static_cast<std::size_t>(m[i]) * block;
    if (dst != packed + i * block) std::memcpy(dst, packed + i * block, block);
  }
}

}  // namespace hier
}  // namespace mci::coll
