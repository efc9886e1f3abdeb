// The phases hierarchical collectives are made of: an algorithm inside this
// host's shared memory, an algorithm among one rank per host, and blocks
// moved between hosts' delegates by hand. Each phase keeps the caller's
// collective kind and sequence number, so an error or a mismatch in any
// phase names what the ranks called.
#pragma once

#include <vector>

#include "collectives/hierarchical.hpp"
#include "collectives/shm_algorithms.hpp"

namespace mci::coll::hier {

bool contains(const std::vector<int>& ranks, int rank);

// Runs `algo` over this host's ranks; nothing when this rank is alone on
// its host (the caller moves the data itself then).
void on_host(const HierCtx& c, const CollectiveDesc& sub, void (*algo)(const ShmCtx&));

// Runs `sub` among `ranks` (one per host) with the algorithm mci would pick
// for a flat group of that size; sub.root is an index into `ranks`. Nothing
// for a rank that is not one of them.
void among(const HierCtx& c, const std::vector<int>& ranks, CollectiveDesc sub);

// Where each host's blocks start when every host's blocks lie one host
// after the other (host order): offsets in blocks, one per host and a last
// one for the total.
std::vector<std::size_t> host_offsets(const HostMap& hosts);

// Copies blocks between rank order (block r of `ranked` is rank r's) and
// host order (`packed`: host after host, each host's ranks ascending).
void pack_host(const HostMap& hosts, int host, const std::uint8_t* ranked, std::uint8_t* packed, std::size_t block);
void unpack_host(const HostMap& hosts, int host, const std::uint8_t* packed, std::uint8_t* ranked, std::size_t block);

}  // namespace mci::coll::hier
