// Collectives over shared memory (ranks of one host). Each is a loop of
// steps over chunks that fit the per-rank buffers: fill this rank's buffers,
// post ready, wait for everyone's ready, read what this rank needs (the next
// ready of every rank says it has finished reading; see shm_world.hpp).
#pragma once

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

// From this block size up, all_gather, gather and all_to_all read each
// peer's block straight from its memory when the world can
// (ShmWorld::single_copy): one copy instead of two, for one system call per
// peer. Below it the call costs more than the copy it saves.
inline constexpr std::size_t kSingleCopyMinBlock = std::size_t{16} << 10;

// Where rank r's data for step s lives: next to its flag when it fits,
// else in its staging buffer. Writer and reader agree: the fingerprint
// check guarantees they use the same size.
inline std::uint8_t* posted(const ShmCtx& c, int r, std::uint64_t s, std::size_t bytes) {
  return bytes <= transport::kShmSmallBytes ? c.w.small(r, s) : c.w.staging(r, s);
}

}  // namespace mci::coll
