// The flight recorder: a preallocated ring of this rank's last N operations
// (what, how big, with whom, which state, when). The thread running an
// operation writes its slot; the hang-report thread reads slots at any time.
// Each slot is a seqlock of atomics: writing costs a few plain stores and no
// lock, reading never blocks the writer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/desc.hpp"

namespace mci::diag {

enum class OpState : std::uint8_t { enqueued = 0, started, completed, failed };
const char* state_name(OpState s);

struct OpRecord {
  std::uint64_t id = 0;   // operation number in the group (1-based, p2p included)
  std::uint64_t seq = 0;  // collective sequence number (0 for p2p)
  std::uint64_t count = 0;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::u8;
  ReduceOp op = ReduceOp::sum;
  Algo algo = Algo::unset;
  OpState state = OpState::enqueued;
  std::int32_t root = -1;  // root, or the peer of a send/recv
  std::int32_t tag = 0;
  std::int64_t enqueued_ns = 0;  // steady clock
  std::int64_t started_ns = 0;
  std::int64_t ended_ns = 0;
  std::int32_t last_rank = -1;    // who entered last, when the backend knows
  std::int64_t last_late_ns = 0;  // how long after this rank it entered

  std::string describe() const;  // "all_reduce #1 (f32 x 2, sum)"
};

std::int64_t now_ns();

class FlightRecorder {
 public:
  // capacity 0 turns recording off (to measure what it costs); others are
  // rounded up to a power of two (a slot's index is then a mask, not a
  // division, twice per call).
  explicit FlightRecorder(std::size_t capacity);

  // Records a new operation (in submission order) and returns its record;
  // the thread that runs it passes the record back to start() and finish(),
  // which only write (no read-modify-write of the slot on the fast path).
  // Times are steady-clock ns (now_ns()); callers pass the ones they have.
  // `started`: the operation runs at once (blocking calls): enqueued and
  // started in one write.
  OpRecord enqueue(const coll::CollectiveDesc& d, std::int64_t now, bool started = false);
  void start(OpRecord& r, std::int64_t now);
  void finish(OpRecord& r, bool ok, std::int64_t now, int last_rank = -1, std::int64_t last_late_ns = 0);

  std::optional<OpRecord> get(std::uint64_t id) const;  // nullopt if overwritten
  std::vector<OpRecord> last(std::size_t n) const;      // oldest first
  std::uint64_t last_id() const { return next_id_.load(std::memory_order_acquire) - 1; }
  // The operation running now (0 if none) and when this rank last left mci.
  std::uint64_t running() const { return running_.load(std::memory_order_acquire); }
  std::int64_t idle_since_ns() const { return idle_since_.load(std::memory_order_acquire); }
  std::size_t capacity() const { return enabled_ ? slots_.size() : 0; }

 private:
  static constexpr int kWords = 10;
  struct Slot {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint64_t> w[kWords];
  };
  // Writes words [first, last] of r's slot (all of them when enqueuing; the
  // few that change when starting and finishing).
  template <int First = 0, int Last = kWords - 1>
  void write(const OpRecord& r);
  std::optional<OpRecord> read(const Slot& s) const;

  bool enabled_;
  std::vector<Slot> slots_;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint64_t> running_{0};
  std::atomic<std::int64_t> idle_since_;
};

}  // namespace mci::diag
