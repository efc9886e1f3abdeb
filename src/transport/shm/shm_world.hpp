// Shared-memory exchange between the ranks of one host. Work proceeds in
// steps that every rank runs in the same order: a rank fills its buffers of
// the step's parity, posts `ready` with the operation's fingerprint, waits
// for the others, reads what it needs, and posts `consumed`. A buffer of
// parity p is refilled only once every rank has consumed the step before
// last, so one step's reads overlap the next step's writes.
//
// Waits spin briefly, then yield, then sleep, and know when ranks outnumber
// cores (then they yield at once). They check the deadline, an abort posted
// by any rank, and whether the peers' processes still exist.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "common/fingerprint.hpp"
#include "transport/shm/shm_segment.hpp"

namespace mci::transport {

class ShmWorld {
 public:
  ShmWorld(ShmSegment seg, int rank, int size);

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t buffer_bytes() const { return seg_.buffer_bytes(); }
  bool oversubscribed() const { return oversubscribed_; }

  // Begins operation `op` (any per-group counter): records this rank's
  // arrival (wall clock) for the straggler report. Every shm operation makes
  // all ranks wait for each other once, so no rank is ever more than one
  // operation ahead: two slots, by parity, are enough.
  void begin_op(std::uint64_t op, std::int64_t arrival_ns);
  // After operation `op`: the rank whose arrival was latest, and when.
  std::pair<int, std::int64_t> latest_arrival(std::uint64_t op) const;

  std::uint64_t next_step() { return ++step_; }
  // Waits until this rank may write its (and, for scatter-like steps, any
  // rank's) buffers of the step's parity.
  void wait_buffers_free(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);
  void post_ready(std::uint64_t step, const Fingerprint& fp);
  // Waits for every rank's ready flag (checking their fingerprints).
  void wait_ready(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);
  void post_reduced(std::uint64_t step);
  void wait_reduced(std::uint64_t step, const Fingerprint& fp, const Deadline& dl);
  void post_consumed(std::uint64_t step);

  std::uint8_t* staging(int rank, std::uint64_t step) const { return seg_.staging(rank, parity(step)); }
  std::uint8_t* result(int rank, std::uint64_t step) const { return seg_.result(rank, parity(step)); }

  // Removes the segment's name (everyone has mapped it).
  void unlink_name() { seg_.unlink(); }

  // Tells every rank on this host why we stop.
  void abort(const std::string& reason) noexcept;

 private:
  static int parity(std::uint64_t step) { return static_cast<int>(step & 1); }
  enum class Flag { ready = 0, reduced = 1, consumed = 2 };
  std::uint64_t flag(int rank, Flag f) const;
  std::atomic<std::uint64_t>& flag_word(int rank, Flag f) const;
  void post(Flag f, std::uint64_t step);
  // Sleeps in the kernel until rank r's flag f changes from `seen` (or a
  // short timeout passes, so deadlines and liveness are still checked).
  void sleep_on(int r, Flag f, std::uint64_t seen);
  // Waits until flag f of every rank is >= target.
  void wait_all(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl, const char* what);
  void check_fingerprint(int r, std::uint64_t step, const Fingerprint& fp) const;
  void check_peers(const Fingerprint& fp) const;
  [[noreturn]] void timeout(Flag f, std::uint64_t target, const Fingerprint& fp, const Deadline& dl,
                            const char* what) const;

  ShmSegment seg_;
  int rank_;
  int size_;
  bool oversubscribed_;
  std::uint64_t step_ = 0;
  std::vector<std::int64_t> pids_;
};

}  // namespace mci::transport
