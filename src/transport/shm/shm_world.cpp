#include "transport/shm/shm_world.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/cpus.hpp"
#include "mci/errors.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MCI_CPU_RELAX() _mm_pause()
#else
#define MCI_CPU_RELAX() ((void)0)
#endif

namespace mci::transport {

namespace {

// A sleeping wait still wakes this often to check the deadline and whether
// the peers' processes are alive (a dead peer never posts its flag).
constexpr auto kLivenessEvery = std::chrono::milliseconds(50);
// How long a wait spins before it checks whether the rank it waits for
// shares its CPU (most waits end well within it on a quiet host).
constexpr auto kSpreadCheckAfter = std::chrono::microseconds(5);
// Spins (pause instructions, each some tens of cycles) before a wait first
// reads the clock.
constexpr int kSpinsBeforeClock = 64;

void pack(const Fingerprint& fp, std::uint64_t step, std::uint64_t out[kShmFingerprintWords]) {
  out[0] = step;
  out[1] = fp.seq;
  out[2] = fp.count;
  out[3] = static_cast<std::uint64_t>(fp.kind) | static_cast<std::uint64_t>(fp.dtype) << 8 |
           static_cast<std::uint64_t>(fp.op) << 16 | static_cast<std::uint64_t>(fp.algo) << 24 |
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(fp.root + 1)) << 32;
}

Fingerprint unpack(const std::uint64_t w[kShmFingerprintWords]) {
  Fingerprint fp;
  fp.seq = w[1];
  fp.count = w[2];
  fp.kind = static_cast<OpKind>(w[3] & 0xff);
  fp.dtype = static_cast<DType>((w[3] >> 8) & 0xff);
  fp.op = static_cast<ReduceOp>((w[3] >> 16) & 0xff);
  fp.algo = static_cast<std::uint8_t>((w[3] >> 24) & 0xff);
  fp.root = static_cast<std::int32_t>(static_cast<std::uint32_t>(w[3] >> 32)) - 1;
  return fp;
}

// False once the process has exited, including as a zombie its parent has
// not reaped yet (kill(pid, 0) still succeeds on those).
bool process_running(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // no /proc: trust kill()
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* rp = std::strrchr(buf, ')');
  return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

}  // namespace

ShmWorld::ShmWorld(ShmSegment seg, int rank, int size, std::vector<int> group_ranks, ShmWait wait, bool single_copy)
    : seg_(std::move(seg)),
      rank_(rank),
      size_(size),
      oversubscribed_(size > online_cpus()),
      spin_ns_(std::chrono::nanoseconds(wait.spin).count()),
      yield_ns_(std::chrono::nanoseconds(wait.yield).count()),
      group_ranks_(std::move(group_ranks)),
      process_running_(process_running),
      single_copy_allowed_(single_copy) {
  seg_.control(rank_).pid.store(::getpid(), std::memory_order_release);
}

std::pair<int, std::int64_t> ShmWorld::latest_arrival() const {
  int who = rank_;
  std::int64_t latest = arrival_ns_;
  for (int r = 0; r < size_; ++r) {
    const std::int64_t a = seg_.control(r).box[parity(step_)].arrival_ns.load(std::memory_order_relaxed);
    if (a > latest) {
      latest = a;
      who = r;
    }
  }
  return {group_rank(who), latest};
}

std::atomic<std::uint64_t>& ShmWorld::flag_word(int r, Flag f) const {
  ShmControl& c = seg_.control(r);
  switch (f) {
    case Flag::ready_even: return c.box[0].ready;
    case Flag::ready_odd: return c.box[1].ready;
    case Flag::reduced: return c.reduced;
  }
  return c.reduced;
}

std::uint64_t ShmWorld::flag(int r, Flag f) const { return flag_word(r, f).load(std::memory_order_acquire); }

// The futex word is the low half of the 64-bit flag (x86 is little-endian),
// which changes at every step. Posting and sleeping use sequentially
// consistent operations on the flag and the sleeper count, so either the
// poster sees the sleeper and wakes it, or the sleeper sees the new value and
// does not sleep.
void ShmWorld::post(Flag f, std::uint64_t step) {
  CpuSpread::note(seg_, rank_);  // where we run now: a waiter's view of us stays fresh
  auto& word = flag_word(rank_, f);
  word.store(step, std::memory_order_seq_cst);
  if (seg_.control(rank_).sleepers[static_cast<int>(f)].load(std::memory_order_seq_cst) > 0) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

void ShmWorld::sleep_on(int r, Flag f, std::uint64_t seen) {
  auto& word = flag_word(r, f);
  auto& sleepers = seg_.control(r).sleepers[static_cast<int>(f)];
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (word.load(std::memory_order_seq_cst) == seen) {
    timespec ts{0, 10 * 1000 * 1000};  // 10 ms: then deadlines and liveness are checked
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, static_cast<std::uint32_t>(seen), &ts,
              nullptr, 0);
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void ShmWorld::check_peers(const Fingerprint& fp, Flag f, std::uint64_t target) const {
  const ShmHeader& h = seg_.header();
  if (h.aborted.load(std::memory_order_acquire) == 2) {
    const int by = h.aborted_by.load(std::memory_order_acquire);
    const std::string reason(h.reason, strnlen(h.reason, kShmReasonBytes));
    if (by == rank_) throw Error(reason);  // our own interrupt(): its reason as it is
    throw PeerError(fmt::format("rank {} aborted the group: {}", group_rank(by), reason), group_rank(by));
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || flag(r, f) >= target) continue;
    const auto pid = static_cast<pid_t>(seg_.control(r).pid.load(std::memory_order_acquire));
    // The flag again, now that the process is gone: the first read may
    // predate a post made just before it exited.
    if (pid > 0 && !process_running_(pid) && flag(r, f) < target) {
      throw PeerError(fmt::format("rank {} (pid {}) exited or crashed during {} on rank {}: check that "
                                  "rank's output for the cause",
                                  group_rank(r), pid, fp.describe(), group_rank(rank_)),
                      group_rank(r));
    }
  }
}

void ShmWorld::timeout(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl,
                       const char* what) const {
  std::string late;
  for (int r = 0; r < size_; ++r) {
    if (flag(r, f) < target) late += fmt::format("{}{}", late.empty() ? "" : ", ", group_rank(r));
  }
  throw TimeoutError(
      fmt::format("Timed out waiting {}ms for {} on rank {}: no answer from rank {} ({} in shared memory). The "
                  "peer never entered this operation, is stuck elsewhere, or is much slower: raise the timeout "
                  "only if it is a slow step, not a hang.",
                  dl.budget().count(), fp.describe(), group_rank(rank_), late, what));
}

void ShmWorld::check_fingerprint(int r, std::uint64_t step, const Fingerprint& fp,
                                 const std::uint64_t mine[kShmFingerprintWords]) const {
  if (r == rank_) return;
  std::uint64_t theirs[kShmFingerprintWords];
  const int p = parity(step);
  for (std::size_t i = 0; i < kShmFingerprintWords; ++i)
    theirs[i] = seg_.control(r).box[p].fp[i].load(std::memory_order_relaxed);
  if (theirs[0] != step) {
    throw MismatchError(
        fmt::format("rank {} and rank {} are out of step in shared memory during {}: the "
                    "ranks called different sequences of collectives",
                    group_rank(rank_), group_rank(r), fp.describe()));
  }
  if (theirs[1] != mine[1] || theirs[2] != mine[2] || theirs[3] != mine[3]) {
    throw MismatchError(collective_mismatch_text(group_rank(rank_), group_rank(r), fp, unpack(theirs)));
  }
}

void ShmWorld::wait_all(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl, const char* what) {
  int r = 0;
  std::uint64_t mine[kShmFingerprintWords]{};
  if (f != Flag::reduced) pack(fp, target, mine);
  auto advance = [&] {
    while (r < size_ && flag(r, f) >= target) {
      if (f != Flag::reduced) check_fingerprint(r, target, fp, mine);
      ++r;
    }
    return r == size_;
  };
  if (advance()) return;
  // Spin only while the peers have cores of their own, and not for longer
  // than a kernel sleep and wake-up would cost. A spin is useless when the
  // rank it waits for shares this CPU (the kernel stacked them): past the
  // first microseconds the wait checks for that and moves away, or, where
  // it cannot move, stops spinning and sleeps (CpuSpread). It does not
  // yield: a yield also hands the core to any other runnable process, even a
  // niced one, for a whole time slice: with one niced busy loop on the
  // machine, 64 KiB all-reduce median 25.6 us yielding, 7.2 us spinning
  // (Open MPI 22.8); quiet, the two are level (3.4 us). A yield when stacked
  // was tried too: slow runs of 600-1600 us beside a busy loop per CPU.
  if (!oversubscribed_ && spin_ns_ > 0) {
    // The first spins read no clock: a read orders the pipeline (27-50 ns
    // under a hypervisor), and a peer that posts meanwhile is seen that much
    // later. 8 B all-reduce, 2 ranks: 0.66 -> 0.63 us.
    for (int spins = 0; spins < kSpinsBeforeClock; ++spins) {
      MCI_CPU_RELAX();
      if (advance()) return;
    }
    const auto now = Clock::now();
    const auto spin_until = std::min(dl.at(), now + std::chrono::nanoseconds(spin_ns_));
    const auto check_at = std::min(spin_until, now + kSpreadCheckAfter);
    for (int spins = 0;; ++spins) {
      MCI_CPU_RELAX();
      if (advance()) return;
      if ((spins & 63) != 63) continue;
      const auto t = Clock::now();
      if (t >= spin_until) break;
      // Past the first microseconds, at each clock read: is the rank we
      // wait for queued behind us on this CPU? Then move, or stop spinning
      // and sleep, which leaves it the CPU.
      if (t >= check_at && spread_.check(seg_, rank_, size_, r) == CpuSpread::Placement::stacked) break;
    }
  } else if (oversubscribed_ && yield_ns_ > 0) {
    // More ranks than cores: hand this core to a rank that can run (likely
    // the one we wait for) rather than spin; a futex sleep and wake-up costs
    // more than a few yields when the peer posts soon.
    const auto yield_until = std::min(dl.at(), Clock::now() + std::chrono::nanoseconds(yield_ns_));
    while (Clock::now() < yield_until) {
      sched_yield();
      if (advance()) return;
    }
  }
  auto next_check = Clock::now() + kLivenessEvery;
  const ShmHeader& header = seg_.header();
  while (!advance()) {
    const auto now = Clock::now();
    // An abort posted on this host (a peer's, or this process's own from
    // another thread) is seen at once, not at the next liveness check.
    if (now >= next_check || header.aborted.load(std::memory_order_acquire) == 2) {
      check_peers(fp, f, target);
      if (now >= dl.at()) timeout(f, target, fp, dl, what);
      next_check = now + kLivenessEvery;
    }
    const std::uint64_t seen = flag(r, f);
    if (seen < target) sleep_on(r, f, seen);
  }
}

void ShmWorld::post_ready(std::uint64_t step, const Fingerprint& fp) {
  std::uint64_t w[kShmFingerprintWords];
  pack(fp, step, w);
  ShmBox& box = seg_.control(rank_).box[parity(step)];
  for (std::size_t i = 0; i < kShmFingerprintWords; ++i) box.fp[i].store(w[i], std::memory_order_relaxed);
  box.arrival_ns.store(arrival_ns_, std::memory_order_relaxed);
  post(ready_flag(step), step);
}

void ShmWorld::wait_ready(std::uint64_t step, const Fingerprint& fp, const Deadline& dl) {
  wait_all(ready_flag(step), step, fp, dl, "waiting for data");
}

void ShmWorld::post_reduced(std::uint64_t step) { post(Flag::reduced, step); }

void ShmWorld::wait_reduced(std::uint64_t step, const Fingerprint& fp, const Deadline& dl) {
  wait_all(Flag::reduced, step, fp, dl, "waiting for reduced slices");
}

// The first rank to abort claims the slot (1), writes its reason, then
// publishes it (2); the others' reasons are dropped.
void ShmWorld::interrupt(const std::string& reason) noexcept {
  abort(reason);
  // Sleepers wake now rather than at their 10 ms timeout.
  for (int r = 0; r < size_; ++r) {
    for (Flag f : {Flag::ready_even, Flag::ready_odd, Flag::reduced}) {
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&flag_word(r, f)), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
                0);
    }
  }
}

void ShmWorld::abort(const std::string& reason) noexcept {
  ShmHeader& h = seg_.header();
  std::uint32_t expected = 0;
  if (!h.aborted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  const std::size_t n = std::min(reason.size(), kShmReasonBytes - 1);
  std::memcpy(h.reason, reason.data(), n);
  h.reason[n] = '\0';
  h.aborted_by.store(rank_, std::memory_order_relaxed);
  h.aborted.store(2, std::memory_order_release);
}

}  // namespace mci::transport
