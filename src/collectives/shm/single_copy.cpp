// The single-copy step the shm collectives share (algorithms.hpp).
#include <cstring>

#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

bool single_copy_step(const ShmCtx& c, const Fingerprint& fp, const void* mine, bool can,
                      const std::function<void(const std::vector<std::uintptr_t>& at)>& use) {
  auto& w = c.w;
  const int n = w.size();
  const std::uint64_t s = w.next_step();
  const std::uint64_t card[2] = {reinterpret_cast<std::uintptr_t>(mine), can ? 1u : 0u};
  std::memcpy(w.small(w.rank(), s), card, sizeof card);
  w.post_ready(s, fp);
  w.wait_ready(s, fp, c.dl);
  std::vector<std::uintptr_t> at(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::uint64_t theirs[2];
    std::memcpy(theirs, w.small(r, s), sizeof theirs);
    if (theirs[1] == 0) return false;  // the next step's ready says this rank has read the cards
    at[static_cast<std::size_t>(r)] = theirs[0];
  }
  use(at);
  w.post_read(s);
  w.wait_read(s, fp, c.dl);
  return true;
}

}  // namespace mci::coll
