// How the algorithms of every family (mesh/, shm/, hierarchical/) cut a
// buffer and arrange ranks: blocks per rank, pipeline chunks, ring indices,
// binomial trees, byte offsets.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mci::coll {

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

// Chunk size for pipelining along rings and trees: 64 KiB less 128 bytes,
// so a chunk and its 48-byte frame header fill one loopback TCP segment
// (MSS 65483) rather than ending in a segment of a few hundred bytes.
// Measured over loopback TCP, 2 ranks, all_reduce against Open MPI's tcp in
// the same runs (docs/performance.md, "TCP"): 512 KiB chunks (and any
// multiple of 64 KiB) took 1M in 590-630 us, 1.2-1.4x Open MPI's time;
// this size takes 350-365 us, 0.72-0.76x, and is 0.64-0.91x from 256 KiB
// to 16 MiB, where 512 KiB gave 0.80-0.93. Smaller chunks also let a
// 2-rank ring reduce one chunk while the next is on the wire (a 1 MiB
// all_reduce was one 512 KiB chunk per step before). Multiple of 128 so
// every dtype's elements divide it.
inline constexpr std::size_t kPipelineChunkBytes = 64 * 1024 - 128;

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// A binomial tree over n members rooted at member `root`: member `me`'s
// parent (-1 at the root) and children, farthest first, as member indices.
// Members are renumbered so the root is virtual 0; the children of v are
// v + 2^k for 2^k below v's lowest set bit. (In mesh/broadcast_tree.cpp;
// hierarchical/broadcast.cpp uses it too.)
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
