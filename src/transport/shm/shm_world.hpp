// Shared-memory exchange between the ranks of one host. Work proceeds in
// steps that every rank runs in the same order: a rank fills its buffers of
// the step's parity, posts `ready` with the operation's fingerprint, waits
// for every rank's `ready`, and reads what it needs. Buffers alternate by
// parity, and a rank posts `ready` for step s+1 only after it has finished
// reading step s: so once a rank has seen everyone's `ready` for step s+1,
// nobody still reads the buffers of step s, and it may refill them at s+2.
// No separate "consumed" flag, no extra cache-line transfer per step.
//
// Waits spin briefly, then sleep; when ranks outnumber cores they yield
// their core instead of spinning (the rank they wait for may need it). They check the deadline, an abort posted
// by any rank, and whether the peers' processes still exist.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "common/fingerprint.hpp"
#include "transport/shm/cpu_spread.hpp"
#include "transport/shm/shm_segment.hpp"

namespace mci::transport {

// How long a wait spins before it sleeps, and (ranks outnumbering cores)
// how long it yields its core first.
struct ShmWait {
  std::chrono::microseconds spin{50};
  std::chrono::microseconds yield{200};
};

class ShmWorld {
 public:
  // group_ranks[i]: the group rank of world rank i, for messages (empty:
  // the same numbers; a host's world in a several-host group differs).
  // `single_copy`: this rank allows peers to read its buffers straight from
  // its memory (MCI_SHM_SINGLE_COPY; see single_copy()).
  ShmWorld(ShmSegment seg, int rank, int size, std::vector<int> group_ranks = {}, ShmWait wait = {},
           bool single_copy = false);

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t buffer_bytes() const { return seg_.buffer_bytes(); }
  // When more of the group's ranks share this machine than the segment has
  // (several pretend hosts on one machine, MCI_HOST_ID).
  void set_oversubscribed(bool v) { oversubscribed_ = v; }

  // Begins an operation: this rank's arrival (a clock shared by the host's
  // processes) rides in every box it posts, so the others learn it with the
  // flag, in the same cache line.
  void begin_op(std::int64_t arrival_ns) { arrival_ns_ = arrival_ns; }
  // After an operation: the rank whose arrival was latest, and when. Read
  // from the boxes of the operation's last step, which nobody overwrites
  // before this rank posts again.
  std::pair<int, std::int64_t> latest_arrival() const;

  std::uint64_t next_step() { return ++step_; }
  void post_ready(std::uint64_t step, const Fingerprint& fp);
  // Waits for every rank's ready flag (checking their fingerprints).
  void wait_ready(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);
  void post_reduced(std::uint64_t step);
  void wait_reduced(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);

  // Single copy (shm_single_copy.cpp): a rank reads a peer's buffer straight
  // from the peer's memory (Linux CMA, process_vm_readv) instead of the
  // peer copying it into the segment first. Whether every rank of this
  // world can is found once, in band, by the first operation that asks (all
  // ranks ask at the same operation: two steps); false from then on where
  // one cannot (the kernel refuses, or MCI_SHM_SINGLE_COPY=never on a rank).
  bool single_copy(const Fingerprint& fp, const Deadline& dl);
  // Copies `len` bytes at address `from` in rank r's process to `to`.
  void read_peer(int r, std::uintptr_t from, void* to, std::size_t len) const;
  // After reading peers' buffers: this rank is done with them, and returns
  // only once every rank is done with its own (the caller may then reuse it).
  void post_read(std::uint64_t step) { post_reduced(step); }
  void wait_read(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);

  std::uint8_t* staging(int rank, std::uint64_t step) const { return seg_.staging(rank, parity(step)); }
  // kShmSmallBytes next to the rank's flag: one cache-line transfer.
  std::uint8_t* small(int rank, std::uint64_t step) const { return seg_.control(rank).box[parity(step)].small; }
  std::uint8_t* result(int rank, std::uint64_t step) const { return seg_.result(rank, parity(step)); }

  // Removes the segment's name (everyone has mapped it).
  void unlink_name() { seg_.unlink(); }

  // Tells every rank on this host why we stop.
  void abort(const std::string& reason) noexcept;
  // From any thread, while another may be inside a wait (transport.hpp's
  // contract): posts the abort for the host's ranks and wakes every sleeper,
  // so this rank's wait fails within milliseconds with `reason`, and the
  // others' with "rank R aborted the group: reason".
  void interrupt(const std::string& reason) noexcept;

  // Tests: answers "is this process still running?" in place of the kernel,
  // so a test can make a peer post and exit exactly between the two reads of
  // its flag that check_peers makes.
  void set_process_probe(std::function<bool(pid_t)> running) { process_running_ = std::move(running); }

 private:
  static int parity(std::uint64_t step) { return static_cast<int>(step & 1); }
  // A flag: the ready word of the box of a parity, or the reduced word.
  enum class Flag { ready_even = 0, ready_odd = 1, reduced = 2 };
  static Flag ready_flag(std::uint64_t step) { return step & 1 ? Flag::ready_odd : Flag::ready_even; }
  std::uint64_t flag(int rank, Flag f) const;
  std::atomic<std::uint64_t>& flag_word(int rank, Flag f) const;
  void post(Flag f, std::uint64_t step);
  // Sleeps in the kernel until rank r's flag f changes from `seen` (or a
  // short timeout passes, so deadlines and liveness are still checked).
  void sleep_on(int r, Flag f, std::uint64_t seen);
  // Waits until flag f of every rank is >= target.
  void wait_all(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl, const char* what);
  // `mine`: this rank's fingerprint words for the step, packed once per wait.
  void check_fingerprint(int r, std::uint64_t step, const Fingerprint& fp,
                         const std::uint64_t mine[kShmFingerprintWords]) const;
  // Throws PeerError for a rank that aborted, or that exited while this rank
  // still waits for its flag `f` to reach `target` (one that posted and then
  // left, as a rank does after its last collective, owes nothing: its data
  // stays in the segment). The flag is read again once the process is found
  // gone: between the first read and the liveness check a peer may post,
  // finish the operation and exit (256 ranks on 2 cores did, in CI).
  void check_peers(const Fingerprint& fp, Flag f, std::uint64_t target) const;
  [[noreturn]] void timeout(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl,
                            const char* what) const;

  ShmSegment seg_;
  int rank_;
  int size_;
  bool oversubscribed_;
  std::int64_t spin_ns_;
  std::int64_t yield_ns_;  // oversubscribed: yield this long before sleeping
  std::uint64_t step_ = 0;
  std::int64_t arrival_ns_ = 0;
  std::vector<int> group_ranks_;
  std::function<bool(pid_t)> process_running_;
  CpuSpread spread_;
  enum class SingleCopy : std::uint8_t { unknown, yes, no };
  bool single_copy_allowed_;
  SingleCopy single_copy_ = SingleCopy::unknown;
  // What peers read from this process to find out whether they can.
  std::uint64_t probe_word_ = 0x79706f632d696d63ull;  // "mci-copy"
  int group_rank(int r) const { return group_ranks_.empty() ? r : group_ranks_[static_cast<std::size_t>(r)]; }
};

}  // namespace mci::transport
