// The flight recorder: a preallocated ring of this rank's last N operations
// (what, how big, with whom, which state, when). The thread running an
// operation writes its slot; the hang-report thread reads slots at any time.
// Each slot is a seqlock of atomics: writing costs a few plain stores and no
// lock, reading never blocks the writer. The ring and its counters live in
// an area of the process's status block when mcirun watches the job
// (monitor/status_block.hpp), so the launcher reads them too; in the
// recorder's own memory otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/desc.hpp"
#include "monitor/status_block.hpp"

namespace mci::diag {

// The record and its states live in the status block's layer, which the
// launcher reads too; here they gain their description.
using monitor::OpState;
using monitor::state_name;

struct OpRecord : monitor::OpRecord {
  std::string describe() const;  // "all_reduce #1 (f32 x 2, sum)"
};

std::int64_t now_ns();

class FlightRecorder {
 public:
  // capacity 0 turns recording off (to measure what it costs); others are
  // rounded up to a power of two (a slot's index is then a mask, not a
  // division, twice per call).
  explicit FlightRecorder(std::size_t capacity);
  // The ring in `area` (its capacity is the area's; 0 keeps recording off).
  FlightRecorder(std::size_t capacity, monitor::AreaView area);
  ~FlightRecorder();

  // Records a new operation (in submission order) and returns its record;
  // the thread that runs it passes the record back to start() and finish(),
  // which only write (no read-modify-write of the slot on the fast path).
  // Times are steady-clock ns (now_ns()); callers pass the ones they have.
  // `started`: the operation runs at once (blocking calls): enqueued and
  // started in one write.
  OpRecord enqueue(const coll::CollectiveDesc& d, std::int64_t now, bool started = false);
  void start(OpRecord& r, std::int64_t now);
  // `device_ns`: the device's own time for it (CUDA events), 0 when the
  // host's window is its duration.
  void finish(OpRecord& r, bool ok, std::int64_t now, int last_rank = -1, std::int64_t last_late_ns = 0,
              std::int64_t device_ns = 0);

  std::optional<OpRecord> get(std::uint64_t id) const;  // nullopt if overwritten
  std::vector<OpRecord> last(std::size_t n) const;      // oldest first
  std::uint64_t last_id() const { return h_->next_id.load(std::memory_order_acquire) - 1; }
  // The operation running now (0 if none) and when this rank last left mci.
  std::uint64_t running() const { return h_->running.load(std::memory_order_acquire); }
  std::int64_t idle_since_ns() const { return h_->idle_since_ns.load(std::memory_order_acquire); }
  std::size_t capacity() const { return enabled_ ? mask_ + 1 : 0; }
  // The group is gone: the launcher's view says so.
  void close() { h_->closed.store(1, std::memory_order_release); }

 private:
  static constexpr int kWords = monitor::OpSlot::kWords;
  // Writes words [first, last] of r's slot (all of them when enqueuing; the
  // few that change when starting and finishing).
  template <int First = 0, int Last = kWords - 1>
  void write(const OpRecord& r);
  void count(const OpRecord& r);

  std::unique_ptr<monitor::PrivateArea> own_;  // when no block holds the ring
  bool enabled_;
  monitor::AreaHeader* h_;
  monitor::OpSlot* slots_;
  std::uint64_t mask_;
  int group_size_ = 1;  // for the counters' bytes (all_gather's are per rank)
};

}  // namespace mci::diag
