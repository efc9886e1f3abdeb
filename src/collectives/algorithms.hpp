// Algorithms over a Transport, one per file, each readable top to bottom.
// They read the descriptor, move bytes with the transport and reduce with
// the kernels; they never see a socket.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/desc.hpp"
#include "common/deadline.hpp"
#include "transport/transport.hpp"

namespace mci::coll {

struct Ctx {
  transport::Transport& t;
  const CollectiveDesc& d;
  const Deadline& dl;
  Scratch& scratch;
};

void all_reduce_ring(const Ctx& c);
void all_reduce_recursive_doubling(const Ctx& c);
void all_reduce_direct(const Ctx& c);
void broadcast_tree(const Ctx& c);
void broadcast_direct(const Ctx& c);
void reduce_tree(const Ctx& c);
void all_gather_ring(const Ctx& c);
void all_gather_direct(const Ctx& c);
void gather_direct(const Ctx& c);
void scatter_direct(const Ctx& c);
void reduce_scatter_ring(const Ctx& c);
void reduce_scatter_direct(const Ctx& c);
void all_to_all_pairwise(const Ctx& c);
void barrier_dissemination(const Ctx& c);
void send_p2p(const Ctx& c);
void recv_p2p(const Ctx& c);

// Splits count elements into n nearly equal blocks (the first count % n are
// one element longer).
struct Blocks {
  std::size_t count;
  int n;
  std::size_t size(int b) const { return count / n + (static_cast<std::size_t>(b) < count % n ? 1 : 0); }
  std::size_t offset(int b) const {
    const auto ub = static_cast<std::size_t>(b);
    return ub * (count / n) + std::min<std::size_t>(ub, count % n);
  }
};

// Cuts len elements into pipeline chunks. An empty range is one empty chunk:
// zero-byte frames keep every rank in lockstep and still carry the
// fingerprint.
struct Chunks {
  std::size_t len;
  std::size_t chunk;
  std::size_t count() const { return len == 0 ? 1 : (len + chunk - 1) / chunk; }
  std::size_t begin(std::size_t i) const { return std::min(len, i * chunk); }
  std::size_t size(std::size_t i) const { return std::min(len, (i + 1) * chunk) - begin(i); }
};

// Chunk size for pipelining along rings and trees.
inline constexpr std::size_t kPipelineChunkBytes = 512 * 1024;

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// A binomial tree over n members rooted at member `root`: member `me`'s
// parent (-1 at the root) and children, farthest first, as member indices.
// Members are renumbered so the root is virtual 0; the children of v are
// v + 2^k for 2^k below v's lowest set bit.
struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};
TreeLinks binomial_tree(int me, int root, int n);
inline std::uint8_t* at(void* base, std::size_t elems, std::size_t elem_size) {
  return static_cast<std::uint8_t*>(base) + elems * elem_size;
}
inline const std::uint8_t* at(const void* base, std::size_t elems, std::size_t elem_size) {
  return static_cast<const std::uint8_t*>(base) + elems * elem_size;
}

}  // namespace mci::coll
