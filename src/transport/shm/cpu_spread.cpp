#include "transport/shm/cpu_spread.hpp"

#include <sched.h>

#include "transport/shm/shm_segment.hpp"

namespace mci::transport {

int CpuSpread::note(const ShmSegment& seg, int rank) {
  const int here = ::sched_getcpu();
  if (here >= 0) seg.control(rank).cpu.store(here + 1, std::memory_order_relaxed);
  return here;
}

CpuSpread::Placement CpuSpread::check(const ShmSegment& seg, int rank, int size, int awaited) {
  const int here = note(seg, rank);
  if (here < 0) return Placement::apart;
  if (awaited == rank || seen_cpu(seg.control(awaited).cpu) != here) return Placement::apart;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_try_) return Placement::stacked;
  next_try_ = now + kRetry;

  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return Placement::stacked;
  cpu_set_t taken;
  CPU_ZERO(&taken);
  for (int r = 0; r < size; ++r) {
    const int c = seen_cpu(seg.control(r).cpu);
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &taken);
  }
  int target = -1;
  for (int c = 0; c < CPU_SETSIZE && target < 0; ++c) {
    if (CPU_ISSET(c, &allowed) && !CPU_ISSET(c, &taken)) target = c;
  }
  if (target < 0) return Placement::stacked;  // every allowed CPU holds a rank: nowhere better
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(target, &one);
  // Narrowing the mask to one CPU migrates this thread now; widening it
  // again does not move it back.
  if (::sched_setaffinity(0, sizeof one, &one) != 0) return Placement::stacked;
  (void)::sched_setaffinity(0, sizeof allowed, &allowed);
  const int moved_to = note(seg, rank);
  return moved_to != here ? Placement::moved : Placement::stacked;
}

}  // namespace mci::transport
