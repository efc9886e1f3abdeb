#include "jobview/node_sample.hpp"

#include <chrono>

#include "common/socket.hpp"

namespace mci::jobview {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

nlohmann::json group_json(const monitor::AreaSnapshot& a, std::int64_t now) {
  nlohmann::json g;
  g["name"] = a.name;
  g["backend"] = a.backend;
  g["rank"] = a.rank;
  g["size"] = a.size;
  g["timeout_ms"] = a.timeout_ms;
  g["closed"] = a.closed;
  g["running"] = a.running ? op_json(*a.running, a.size, now) : nlohmann::json(nullptr);
  g["idle_ms"] = a.running ? 0.0 : static_cast<double>(now - a.idle_since_ns) / 1e6;
  g["last_id"] = a.last_id;
  nlohmann::json kinds = nlohmann::json::object();
  for (std::size_t k = 0; k < kOpKindCount; ++k) {
    const auto& c = a.kinds[k];
    if (c.ops == 0 && c.failed == 0) continue;
    kinds[std::string(op_name(static_cast<OpKind>(k)))] = {{"ops", c.ops},
                                                           {"failed", c.failed},
                                                           {"bytes", c.bytes},
                                                           {"busy_s", static_cast<double>(c.busy_ns) / 1e9}};
  }
  g["kinds"] = std::move(kinds);
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& r : a.recent) {
    // Collectives only: they are what ranks meet in, by sequence number.
    if (r.seq == 0 || (r.state != monitor::OpState::completed && r.state != monitor::OpState::failed)) continue;
    recent.push_back({{"seq", r.seq},
                      {"kind", op_name(r.kind)},
                      {"dtype", dtype_name(r.dtype)},
                      {"bytes", monitor::op_bytes(r, a.size)},
                      {"dur_us", static_cast<double>(r.duration_ns()) / 1e3},
                      {"clock", r.device_ns > 0 ? "cuda" : "host"},
                      {"ago_ms", static_cast<double>(now - r.ended_ns) / 1e6},
                      {"ok", r.state == monitor::OpState::completed}});
  }
  g["recent"] = std::move(recent);
  return g;
}

}  // namespace

nlohmann::json op_json(const monitor::OpRecord& r, int group_size, std::int64_t now_ns) {
  const std::int64_t since = r.state == monitor::OpState::enqueued ? r.enqueued_ns : r.started_ns;
  return {{"kind", op_name(r.kind)},
          {"seq", r.seq},
          {"dtype", dtype_name(r.dtype)},
          {"bytes", monitor::op_bytes(r, group_size)},
          {"state", monitor::state_name(r.state)},
          {"peer", is_p2p(r.kind) ? r.root : -1},
          {"for_ms", static_cast<double>(now_ns - since) / 1e6}};
}

nlohmann::json sample_node(int node, std::vector<LocalRank>& ranks) {
  const std::int64_t now = steady_now_ns();
  const std::string host = host_name();
  nlohmann::json out;
  out["node"] = node;
  out["host"] = host;
  nlohmann::json list = nlohmann::json::array();
  for (auto& lr : ranks) {
    nlohmann::json r;
    r["rank"] = lr.rank;
    r["local_rank"] = lr.local_rank;
    r["host"] = host;
    r["pid"] = lr.pid;
    r["process"] = lr.process;
    r["exit"] = lr.exit;
    // How long ago, not when: node 0's clock is not this node's, and the
    // sample's transit is the only error this leaves (as for "ago_ms").
    if (lr.changed_ns > 0) r["changed_ago_ms"] = static_cast<double>(now - lr.changed_ns) / 1e6;
    r["replacement"] = lr.replacement;
    r["dumps"] = lr.dump_signal > 0;
    nlohmann::json groups = nlohmann::json::array();
    if (lr.reader) {
      std::vector<std::uint64_t> none;
      if (auto b = lr.reader->read(kRecentOps * 2, none)) {
        lr.dump_signal = b->dump_signal;
        for (const auto& a : b->areas) groups.push_back(group_json(a, now));
      }
    }
    r["groups"] = std::move(groups);
    list.push_back(std::move(r));
  }
  out["ranks"] = std::move(list);
  return out;
}

}  // namespace mci::jobview
