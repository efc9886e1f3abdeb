// The phases hierarchical collectives are made of: an algorithm inside this
// host's shared memory, an algorithm among one rank per host, and blocks
// moved between hosts' delegates by hand. Each phase keeps the caller's
// collective kind and sequence number, so an error or a mismatch in any
// phase names what the ranks called.
#pragma once

#include <vector>

#include "collectives/hierarchical/algorithms.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll::hier {

// Large messages cross between hosts in pieces of this size, so the
// network carries one piece while shared memory works on another; messages
// of at least two pieces are pipelined.
inline constexpr std::size_t kPieceBytes = 1 << 20;
inline bool pipelined(std::size_t bytes) { return bytes >= 2 * kPieceBytes; }

bool contains(const std::vector<int>& ranks, int rank);

// c.d as one phase runs it: another element count, local root, buffers
// and algorithm (kind, sequence number, dtype and op stay the caller's).
CollectiveDesc phase(const CollectiveDesc& d, std::size_t count, int root, const void* in, void* out, Algo algo);

// Runs `algo` over this host's ranks; nothing when this rank is alone on
// its host.
void on_host(const HierCtx& c, const CollectiveDesc& sub, void (*algo)(const ShmCtx&));
// The same, and a rank alone on its host copies sub.in to sub.out: what a
// gather, scatter or reduce among one rank gives.
void on_host_or_copy(const HierCtx& c, const CollectiveDesc& sub, void (*algo)(const ShmCtx&));
// A reduction to sub.root inside the host (shm_direct or shm_sliced by
// size), or the copy of a rank alone.
void host_reduce(const HierCtx& c, CollectiveDesc sub);

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

// Large all-reduces across three hosts or more (all_reduce_ring.cpp).
void all_reduce_ring_of_hosts(const HierCtx& c, ReduceOp op);

}  // namespace mci::coll::hier
