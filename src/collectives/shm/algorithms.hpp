// Collectives over shared memory (ranks of one host). Each is a loop of
// steps over chunks that fit the per-rank buffers: fill this rank's buffers,
// post ready, wait for everyone's ready, read what this rank needs (the next
// ready of every rank says it has finished reading; see shm_world.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/algorithm_rows.hpp"
#include "collectives/blocks.hpp"
#include "collectives/desc.hpp"
#include "collectives/kernels/copy.hpp"
#include "common/deadline.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::coll {

struct ShmCtx {
  transport::ShmWorld& w;
  const CollectiveDesc& d;
  const Deadline& dl;
  Scratch& scratch;
  SharedCopier& copier;  // this rank's plain-or-streaming choice, kept across calls
};

// The functions of the shm rows (collectives/algorithm_rows.hpp).
#define MCI_DECLARE_SHM_ROW(algo, kind, function) void function(const ShmCtx& c);
MCI_ALGORITHM_ROWS(MCI_ALGORITHM_ROW_ELSEWHERE, MCI_DECLARE_SHM_ROW, MCI_ALGORITHM_ROW_ELSEWHERE)
#undef MCI_DECLARE_SHM_ROW

// One synchronised step: fill(step) writes buffers, use(step) reads them.
// Every step waits for every rank's ready flag: that is what makes refilling
// the buffers two steps later safe (see shm_world.hpp).
template <class Fill, class Use>
void shm_step(const ShmCtx& c, const Fingerprint& fp, Fill&& fill, Use&& use) {
  const std::uint64_t s = c.w.next_step();
  fill(s);
  c.w.post_ready(s, fp);
  c.w.wait_ready(s, fp, c.dl);
  use(s);
}

// From this block size up, all_gather, gather, all_to_all, scatter and
// broadcast read each peer's block straight from its memory when the world can
// (ShmWorld::single_copy): one copy instead of two, for one system call per
// peer. Below it the call costs more than the copy it saves.
inline constexpr std::size_t kSingleCopyMinBlock = std::size_t{16} << 10;
// Broadcast copies once only below this (broadcast.cpp says why).
inline constexpr std::size_t kSingleCopyMaxBroadcast = std::size_t{1} << 20;

// One single-copy step (shm/single_copy.cpp): every rank posts where its
// buffer is (`mine`) and whether it can take part (`can`); when all can,
// use(at) reads what this rank needs from the others (at[r]: rank r's
// address, for ShmWorld::read_peer), and the step ends once every rank has
// finished reading, so each may then reuse its buffer. False, and nothing
// read, when some rank cannot: all then stage, alike.
bool single_copy_step(const ShmCtx& c, const Fingerprint& fp, const void* mine, bool can,
                      const std::function<void(const std::vector<std::uintptr_t>& at)>& use);
// Whether an operation with blocks of `block` bytes copies once: every rank
// asks alike (the size is the same on all), so the world's one-time probe
// runs on all of them together.
inline bool single_copy_size(const ShmCtx& c, std::size_t block, const Fingerprint& fp) {
  return c.w.size() > 1 && block >= kSingleCopyMinBlock && c.w.single_copy(fp, c.dl);
}

// Where rank r's data for step s lives: next to its flag when it fits,
// else in its staging buffer. Writer and reader agree: the fingerprint
// check guarantees they use the same size.
inline std::uint8_t* posted(const ShmCtx& c, int r, std::uint64_t s, std::size_t bytes) {
  return bytes <= transport::kShmSmallBytes ? c.w.small(r, s) : c.w.staging(r, s);
}

}  // namespace mci::coll
