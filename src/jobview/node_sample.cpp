#include "jobview/node_sample.hpp"

#include <chrono>

#include "common/socket.hpp"

namespace mci::jobview {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

GroupSample group_sample(const monitor::AreaSnapshot& a, std::int64_t now) {
  GroupSample g;
  g.name = a.name;
  g.backend = a.backend;
  g.rank = a.rank;
  g.size = a.size;
  g.timeout_ms = static_cast<double>(a.timeout_ms);
  g.closed = a.closed;
  if (a.running) g.running = running_op(*a.running, a.size, now);
  g.idle_ms = a.running ? 0.0 : static_cast<double>(now - a.idle_since_ns) / 1e6;
  g.last_id = a.last_id;
  for (std::size_t k = 0; k < kOpKindCount; ++k) {
    const auto& c = a.kinds[k];
    if (c.ops == 0 && c.failed == 0) continue;
    g.kinds[std::string(op_name(static_cast<OpKind>(k)))] =
        KindCounters{c.ops, c.failed, c.bytes, static_cast<double>(c.busy_ns) / 1e9};
  }
  for (const auto& r : a.recent) {
    // Collectives only: they are what ranks meet in, by sequence number.
    if (r.seq == 0 || (r.state != monitor::OpState::completed && r.state != monitor::OpState::failed)) continue;
    RecentOp op;
    op.seq = r.seq;
    op.kind = op_name(r.kind);
    op.dtype = dtype_name(r.dtype);
    op.bytes = monitor::op_bytes(r, a.size);
    op.dur_us = static_cast<double>(r.duration_ns()) / 1e3;
    op.clock = r.device_ns > 0 ? "cuda" : "host";
    op.ago_ms = static_cast<double>(now - r.ended_ns) / 1e6;
    op.ok = r.state == monitor::OpState::completed;
    g.recent.push_back(std::move(op));
  }
  return g;
}

}  // namespace

RunningOp running_op(const monitor::OpRecord& r, int group_size, std::int64_t now_ns) {
  const std::int64_t since = r.state == monitor::OpState::enqueued ? r.enqueued_ns : r.started_ns;
  RunningOp op;
  op.kind = op_name(r.kind);
  op.seq = r.seq;
  op.dtype = dtype_name(r.dtype);
  op.bytes = monitor::op_bytes(r, group_size);
  op.state = monitor::state_name(r.state);
  op.peer = is_p2p(r.kind) ? r.root : -1;
  op.for_ms = static_cast<double>(now_ns - since) / 1e6;
  return op;
}

NodeSample sample_node(int node, std::vector<LocalRank>& ranks) {
  const std::int64_t now = steady_now_ns();
  NodeSample out;
  out.node = node;
  out.host = host_name();
  for (auto& lr : ranks) {
    RankSample r;
    r.rank = lr.rank;
    r.local_rank = lr.local_rank;
    r.host = out.host;
    r.pid = lr.pid;
    r.process = lr.process;
    r.exit = lr.exit;
    // How long ago, not when: node 0's clock is not this node's, and the
    // sample's transit is the only error this leaves (as for "ago_ms").
    if (lr.changed_ns > 0) r.changed_ago_ms = static_cast<double>(now - lr.changed_ns) / 1e6;
    r.replacement = lr.replacement;
    r.dumps = lr.dump_signal > 0;
    if (lr.reader) {
      std::vector<std::uint64_t> none;
      if (auto b = lr.reader->read(kRecentOps * 2, none)) {
        lr.dump_signal = b->dump_signal;
        for (const auto& a : b->areas) r.groups.push_back(group_sample(a, now));
      }
    }
    out.ranks.push_back(std::move(r));
  }
  return out;
}

}  // namespace mci::jobview
