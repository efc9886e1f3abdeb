#include "diag/flight_recorder.hpp"

#include <bit>
#include <utility>

#include <fmt/format.h>

namespace mci::diag {

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
    : own_(std::make_unique<monitor::PrivateArea>(capacity)),
      enabled_(capacity > 0),
      h_(own_->view().header),
      slots_(own_->view().slots),
      mask_(h_->capacity.load(std::memory_order_relaxed) - 1) {
  h_->idle_since_ns.store(now_ns(), std::memory_order_relaxed);
}

FlightRecorder::FlightRecorder(std::size_t capacity, monitor::AreaView area)
    : enabled_(capacity > 0),
      h_(area.header),
      slots_(area.slots),
      mask_(h_->capacity.load(std::memory_order_relaxed) - 1),
      group_size_(static_cast<int>(h_->size.load(std::memory_order_relaxed))) {
  h_->idle_since_ns.store(now_ns(), std::memory_order_relaxed);
}

FlightRecorder::~FlightRecorder() = default;

// The word range is a template argument: starting and finishing a call
// (twice per blocking call) compute and store only the words that change.
template <int First, int Last>
void FlightRecorder::write(const OpRecord& r) {
  if (!enabled_) return;
  monitor::OpSlot& s = slots_[r.id & mask_];
  const std::uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);  // odd: being written
  // Release stores of the data keep the odd version before them, and an
  // acquire load of the data keeps the reader's second version check after
  // it (no standalone fences: sanitizers model these exactly; on x86 all of
  // them are plain moves).
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (s.w[First + I].store(monitor::slot_word(r, First + I), std::memory_order_release), ...);
  }
  (std::make_integer_sequence<int, Last - First + 1>{});
  s.version.store(v + 2, std::memory_order_release);
}

// Only this group's running thread finishes operations: a load and a store
// per counter, no locked instruction on the hot path.
void FlightRecorder::count(const OpRecord& r) {
  monitor::KindCounters& c = h_->kinds[static_cast<std::size_t>(r.kind)];
  auto bump = [](std::atomic<std::uint64_t>& a, std::uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  };
  if (r.state == OpState::failed) {
    bump(c.failed, 1);
    return;
  }
  bump(c.ops, 1);
  bump(c.bytes, monitor::op_bytes(r, group_size_));
  bump(c.busy_ns, static_cast<std::uint64_t>(std::max<std::int64_t>(r.duration_ns(), 0)));
}

OpRecord FlightRecorder::enqueue(const coll::CollectiveDesc& d, std::int64_t now, bool started) {
  OpRecord r;
  r.id = h_->next_id.fetch_add(1, std::memory_order_acq_rel);
  r.seq = d.seq;
  r.count = d.count;
  r.kind = d.kind;
  r.dtype = d.dtype;
  r.op = d.op;
  r.algo = d.algo;
  r.root = is_p2p(d.kind) ? d.peer : d.root;
  r.tag = d.tag;
  r.state = started ? OpState::started : OpState::enqueued;
  if (started) h_->running.store(r.id, std::memory_order_release);
  if (!enabled_) return r;
  r.enqueued_ns = now;
  if (started) r.started_ns = now;
  write(r);
  return r;
}

void FlightRecorder::start(OpRecord& r, std::int64_t now) {
  h_->running.store(r.id, std::memory_order_release);
  if (!enabled_) return;
  r.state = OpState::started;
  r.started_ns = now;
  write<3, 6>(r);
}

void FlightRecorder::finish(OpRecord& r, bool ok, std::int64_t t, int last_rank, std::int64_t last_late_ns,
                            std::int64_t device_ns) {
  if (enabled_) {
    r.state = ok ? OpState::completed : OpState::failed;
    r.ended_ns = t;
    r.last_rank = last_rank;
    r.last_late_ns = last_late_ns;
    r.device_ns = device_ns;
    write<3, 10>(r);
    count(r);
  }
  h_->running.store(0, std::memory_order_release);
  h_->idle_since_ns.store(t, std::memory_order_release);
}

std::optional<OpRecord> FlightRecorder::get(std::uint64_t id) const {
  if (!enabled_) return std::nullopt;
  auto r = monitor::read_slot(slots_[id & mask_]);
  if (!r || r->id != id) return std::nullopt;
  return OpRecord{*r};
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
