#include "diag/torch_dump.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "diag/pickle_writer.hpp"

namespace mci::diag {

int DumpGroup::job_rank() const {
  return rank >= 0 && static_cast<std::size_t>(rank) < job_ranks.size() ? job_ranks[static_cast<std::size_t>(rank)]
                                                                        : rank;
}

std::vector<int> identity_ranks(int size) {
  std::vector<int> v(static_cast<std::size_t>(std::max(size, 0)));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TensorShapes torch_shapes(OpKind kind, std::uint64_t count, int size, bool at_root) {
  const std::uint64_t all = count * static_cast<std::uint64_t>(std::max(size, 1));
  const OpShape& s = op_shape(kind);
  // torch's view of the row: a send or a recv has its one tensor on both
  // sides; a side of one count is a tensor on every rank (broadcast's and
  // reduce's are in place); a side per rank is a list that only the root
  // holds when the row says so (gather's output, scatter's input).
  if (s.p2p) return {{count}, {count}};
  auto side = [&](BufferExtent e, bool at_root_only) -> std::vector<std::uint64_t> {
    if (e == BufferExtent::none || (e == BufferExtent::per_rank && at_root_only && !at_root)) return {};
    return {e == BufferExtent::per_rank ? all : count};
  };
  return {side(s.in, s.in_at_root_only), side(s.out, s.out_at_root_only)};
}

std::string_view torch_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "Float";
    case DType::f64: return "Double";
    case DType::f16: return "Half";
    case DType::bf16: return "BFloat16";
    case DType::i8: return "Char";
    case DType::u8: return "Byte";
    case DType::i32: return "Int";
    case DType::i64: return "Long";
  }
  return "Undefined";
}

std::string torch_profiling_name(const OpRecord& r, int rank) {
  const std::string op(op_name(r.kind));
  // torchfrtrace splits "send S->D" and "recv D<-S" (group ranks; "?" is a
  // receive from any source, which names no sender).
  if (r.kind == OpKind::send) return fmt::format("{}:{} {}->{}", kTorchDumpLibrary, op, rank, r.root);
  if (r.kind == OpKind::recv) {
    return r.root < 0 ? fmt::format("{}:{} {}<-?", kTorchDumpLibrary, op, rank)
                      : fmt::format("{}:{} {}<-{}", kTorchDumpLibrary, op, rank, r.root);
  }
  return fmt::format("{}:{}", kTorchDumpLibrary, op);
}

namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  // torch writes the members as the text of a Python list, "[0, 1, 2]", and
  // torchfrtrace evaluates it back (ast.literal_eval).
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  return s + "]";
}

void shape_list(PickleWriter& w, const std::vector<std::uint64_t>& counts) {
  w.begin_list();
  for (const std::uint64_t c : counts) {
    w.begin_list();
    w.integer(static_cast<std::int64_t>(c));
    w.end();
  }
  w.end();
}

void dtype_list(PickleWriter& w, std::size_t tensors, DType t) {
  w.begin_list();
  for (std::size_t i = 0; i < tensors; ++i) w.str(torch_dtype_name(t));
  w.end();
}

// One entry waiting to be written, with the numbers torch gives it that mci's
// record does not hold as such.
struct Entry {
  const GroupRecords* g;
  const OpRecord* r;
  std::uint64_t collective_seq;  // collectives issued so far, this one included
  std::uint64_t p2p_seq;         // sends and receives issued so far, this one included
};

// torch numbers collectives and point-to-point separately, each entry
// carrying both counters as they stand after it was issued (a collective
// the sends and receives before it, a send the collectives before it). mci
// numbers every operation (id) and collectives (seq), so both follow: a
// collective's sends and receives before it are id - seq; a send's
// collectives before it are those of the nearest collective record, which
// the ring may have dropped: the first collective after it then says (its
// seq - 1), and with none in the ring at all it is 0.
void number(const GroupRecords& g, std::vector<Entry>& into) {
  const auto& recs = g.records;
  std::uint64_t collectives = 0;
  if (auto first = std::find_if(recs.begin(), recs.end(), [](const OpRecord& r) { return !is_p2p(r.kind); });
      first != recs.end()) {
    collectives = first->seq - 1;
  }
  for (const OpRecord& r : recs) {
    if (!is_p2p(r.kind)) collectives = r.seq;
    const std::uint64_t p2p = r.id >= collectives ? r.id - collectives : 0;
    into.push_back(Entry{&g, &r, collectives, p2p});
  }
}

void write_entry(PickleWriter& w, const Entry& e, std::int64_t wall_minus_steady_ns) {
  const OpRecord& r = *e.r;
  const DumpGroup& g = e.g->group;
  const bool p2p = is_p2p(r.kind);
  const auto wall = [&](std::int64_t steady) { return steady + wall_minus_steady_ns; };
  // States: torch says "scheduled" (queued), "started", "completed". A failed
  // operation (a timeout, an abort) started and never completed, which is
  // what a hung one is in torch's dump too; it is retired (mci stopped
  // watching it), as torch's watchdog retires a timed-out work.
  const bool started = r.state != OpState::enqueued && r.started_ns != 0;
  const bool completed = r.state == OpState::completed;
  const TensorShapes shapes = torch_shapes(r.kind, r.count, g.size, r.root == g.rank);

  w.begin_dict();
  w.str("frames");  // no stack traces: mci does not capture them
  w.begin_list();
  w.end();
  w.str("record_id");
  w.integer(static_cast<std::int64_t>(r.id) - 1);  // torch counts from 0, mci from 1
  w.str("pg_id");
  w.integer(e.g->pg_id);
  w.str("process_group");
  w.begin_tuple();
  w.str(g.name);
  w.str(g.desc);
  w.end();
  w.str("collective_seq_id");
  w.integer(static_cast<std::int64_t>(e.collective_seq));
  w.str("p2p_seq_id");
  w.integer(static_cast<std::int64_t>(e.p2p_seq));
  w.str("op_id");
  w.integer(static_cast<std::int64_t>(r.id));
  w.str("profiling_name");
  w.str(torch_profiling_name(r, g.rank));
  w.str("time_created_ns");
  w.integer(wall(r.enqueued_ns));
  if (completed && started) {
    w.str("duration_ms");
    w.real(static_cast<double>(r.duration_ns()) / 1e6);  // CUDA events' time for nccl, as torch's NCCL entries
  }
  w.str("input_sizes");
  shape_list(w, shapes.in);
  w.str("input_dtypes");
  dtype_list(w, shapes.in.size(), r.dtype);
  w.str("output_sizes");
  shape_list(w, shapes.out);
  w.str("output_dtypes");
  dtype_list(w, shapes.out.size(), r.dtype);
  w.str("state");
  w.str(completed ? "completed" : started ? "started" : "scheduled");
  w.str("time_discovered_started_ns");
  started ? w.integer(wall(r.started_ns)) : w.none();
  w.str("time_discovered_completed_ns");
  completed ? w.integer(wall(r.ended_ns)) : w.none();
  w.str("retired");
  w.boolean(completed || r.state == OpState::failed);
  w.str("timeout_ms");
  w.integer(static_cast<std::int64_t>(g.timeout.count()));
  w.str("is_p2p");
  w.boolean(p2p);
  w.end();
}

// torch's pg_status: the last collective enqueued, started and completed
// (-1: none yet), by what the ring still holds.
void write_status(PickleWriter& w, const GroupRecords& g) {
  std::int64_t enqueued = -1, started = -1, completed = -1;
  for (const OpRecord& r : g.records) {
    if (is_p2p(r.kind)) continue;
    const auto seq = static_cast<std::int64_t>(r.seq);
    enqueued = std::max(enqueued, seq);
    if (r.state != OpState::enqueued) started = std::max(started, seq);
    if (r.state == OpState::completed) completed = std::max(completed, seq);
  }
  w.begin_dict();
  w.str("last_enqueued_collective");
  w.integer(enqueued);
  w.str("last_started_collective");
  w.integer(started);
  w.str("last_completed_collective");
  w.integer(completed);
  w.end();
}

}  // namespace

std::string torch_dump(const std::vector<GroupRecords>& groups, std::int64_t wall_minus_steady_ns) {
  PickleWriter w;
  w.begin_dict();
  w.str("version");
  w.str(kTorchDumpVersion);
  w.str("pg_config");
  w.begin_dict();
  for (const GroupRecords& g : groups) {
    w.str(g.group.name);
    w.begin_dict();
    w.str("name");
    w.str(g.group.name);
    w.str("desc");
    w.str(g.group.desc);
    w.str("ranks");
    w.str(ranks_text(g.group.job_ranks));
    w.end();
  }
  w.end();
  w.str("comm_lib_version");
  std::string backends;
  for (const GroupRecords& g : groups) {
    if (backends.find(g.group.backend) == std::string::npos)
      backends += (backends.empty() ? "" : ",") + g.group.backend;
  }
  w.str(fmt::format("{} ({})", kTorchDumpLibrary, backends));
  w.str("pg_status");
  w.begin_dict();
  for (const GroupRecords& g : groups) {
    w.str(std::to_string(g.pg_id));
    write_status(w, g);
  }
  w.end();

  // One list for the process, in the order the operations were issued
  // (torch's ring is one for every group too).
  std::vector<Entry> entries;
  for (const GroupRecords& g : groups) number(g, entries);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.r->enqueued_ns < b.r->enqueued_ns; });
  w.str("entries");
  w.begin_list();
  for (const Entry& e : entries) write_entry(w, e, wall_minus_steady_ns);
  w.end();
  w.end();
  return w.finish();
}

}  // namespace mci::diag
