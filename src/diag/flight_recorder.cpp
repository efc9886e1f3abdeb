#include "diag/flight_recorder.hpp"

#include <bit>
#include <utility>

#include <fmt/format.h>

namespace mci::diag {

const char* state_name(OpState s) {
  switch (s) {
    case OpState::enqueued: return "enqueued";
    case OpState::started: return "started";
    case OpState::completed: return "completed";
    case OpState::failed: return "failed";
  }
  return "?";
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string OpRecord::describe() const {
  Fingerprint fp;
  fp.kind = kind;
  fp.seq = is_p2p(kind) ? static_cast<std::uint64_t>(tag) : seq;
  fp.count = count;
  fp.dtype = dtype;
  fp.op = op;
  fp.root = root;
  std::string s = fp.describe();
  if (is_p2p(kind)) {
    // A recv's source -1 is mci::any_source: whichever rank sends first.
    if (kind == OpKind::recv && root < 0) return s + " from any source";
    s += fmt::format(" {} rank {}", kind == OpKind::send ? "to" : "from", root);
  }
  return s;
}

FlightRecorder::FlightRecorder(std::size_t capacity)
    : enabled_(capacity > 0), slots_(std::bit_ceil(std::max<std::size_t>(capacity, 1))), idle_since_(now_ns()) {}

// The word range is a template argument: starting and finishing a call
// (twice per blocking call) compute and store only the words that change.
template <int First, int Last>
void FlightRecorder::write(const OpRecord& r) {
  if (!enabled_) return;
  Slot& s = slots_[r.id & (slots_.size() - 1)];
  const std::uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);  // odd: being written
  // Release stores of the data keep the odd version before them, and an
  // acquire load of the data keeps the reader's second version check after
  // it (no standalone fences: sanitizers model these exactly; on x86 all of
  // them are plain moves).
  auto word = [&](int i) -> std::uint64_t {
    switch (i) {
      case 0: return r.id;
      case 1: return r.seq;
      case 2: return r.count;
      case 3:
        return static_cast<std::uint64_t>(r.kind) | static_cast<std::uint64_t>(r.dtype) << 8 |
               static_cast<std::uint64_t>(r.op) << 16 | static_cast<std::uint64_t>(r.algo) << 24 |
               static_cast<std::uint64_t>(r.state) << 32;
      case 4:
        return static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.root)) |
               static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.tag)) << 32;
      case 5: return static_cast<std::uint64_t>(r.enqueued_ns);
      case 6: return static_cast<std::uint64_t>(r.started_ns);
      case 7: return static_cast<std::uint64_t>(r.ended_ns);
      case 8: return static_cast<std::uint64_t>(static_cast<std::int64_t>(r.last_rank));
      default: return static_cast<std::uint64_t>(r.last_late_ns);
    }
  };
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (s.w[First + I].store(word(First + I), std::memory_order_release), ...);
  }
  (std::make_integer_sequence<int, Last - First + 1>{});
  s.version.store(v + 2, std::memory_order_release);
}

std::optional<OpRecord> FlightRecorder::read(const Slot& s) const {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    std::uint64_t w[kWords];
    for (int i = 0; i < kWords; ++i) w[i] = s.w[i].load(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != v1) continue;
    if (v1 == 0) return std::nullopt;
    OpRecord r;
    r.id = w[0];
    r.seq = w[1];
    r.count = w[2];
    r.kind = static_cast<OpKind>(w[3] & 0xff);
    r.dtype = static_cast<DType>((w[3] >> 8) & 0xff);
    r.op = static_cast<ReduceOp>((w[3] >> 16) & 0xff);
    r.algo = static_cast<Algo>((w[3] >> 24) & 0xff);
    r.state = static_cast<OpState>((w[3] >> 32) & 0xff);
    r.root = static_cast<std::int32_t>(static_cast<std::uint32_t>(w[4]));
    r.tag = static_cast<std::int32_t>(static_cast<std::uint32_t>(w[4] >> 32));
    r.enqueued_ns = static_cast<std::int64_t>(w[5]);
    r.started_ns = static_cast<std::int64_t>(w[6]);
    r.ended_ns = static_cast<std::int64_t>(w[7]);
    r.last_rank = static_cast<std::int32_t>(static_cast<std::int64_t>(w[8]));
    r.last_late_ns = static_cast<std::int64_t>(w[9]);
    return r;
  }
  return std::nullopt;  // a writer kept the slot busy; the report says "unknown"
}

OpRecord FlightRecorder::enqueue(const coll::CollectiveDesc& d, std::int64_t now, bool started) {
  OpRecord r;
  r.id = next_id_.fetch_add(1, std::memory_order_acq_rel);
  r.seq = d.seq;
  r.count = d.count;
  r.kind = d.kind;
  r.dtype = d.dtype;
  r.op = d.op;
  r.algo = d.algo;
  r.root = is_p2p(d.kind) ? d.peer : d.root;
  r.tag = d.tag;
  r.state = started ? OpState::started : OpState::enqueued;
  if (started) running_.store(r.id, std::memory_order_release);
  if (!enabled_) return r;
  r.enqueued_ns = now;
  if (started) r.started_ns = now;
  write(r);
  return r;
}

// Slot words: 0 id, 1 seq, 2 count, 3 kind/dtype/op/algo/state, 4 root/tag,
// 5 enqueued, 6 started, 7 ended, 8 last rank, 9 its lateness.
void FlightRecorder::start(OpRecord& r, std::int64_t now) {
  running_.store(r.id, std::memory_order_release);
  if (!enabled_) return;
  r.state = OpState::started;
  r.started_ns = now;
  write<3, 6>(r);
}

void FlightRecorder::finish(OpRecord& r, bool ok, std::int64_t t, int last_rank, std::int64_t last_late_ns) {
  if (enabled_) {
    r.state = ok ? OpState::completed : OpState::failed;
    r.ended_ns = t;
    r.last_rank = last_rank;
    r.last_late_ns = last_late_ns;
    write<3, 9>(r);
  }
  running_.store(0, std::memory_order_release);
  idle_since_.store(t, std::memory_order_release);
}

std::optional<OpRecord> FlightRecorder::get(std::uint64_t id) const {
  if (!enabled_) return std::nullopt;
  auto r = read(slots_[id & (slots_.size() - 1)]);
  if (!r || r->id != id) return std::nullopt;
  return r;
}

std::vector<OpRecord> FlightRecorder::last(std::size_t n) const {
  std::vector<OpRecord> out;
  const std::uint64_t top = last_id();
  const std::uint64_t first = top > n ? top - n + 1 : 1;
  for (std::uint64_t id = first; id <= top; ++id) {
    if (auto r = get(id)) out.push_back(*r);
  }
  return out;
}

}  // namespace mci::diag
