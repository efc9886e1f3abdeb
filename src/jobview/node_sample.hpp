// What one node's launcher knows of its ranks at one moment, read from
// their status blocks (monitor/status_block.hpp) plus what only the
// launcher knows (the process's state, how it exited), as the JSON that
// node 0 aggregates: read directly on node 0, through the job's store
// (one key per node, set once per refresh) from the others.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/status_block.hpp"

namespace mci::jobview {

// A rank process as its launcher sees it.
struct LocalRank {
  int rank = 0;
  int local_rank = 0;
  std::int64_t pid = 0;
  std::string process = "starting";  // starting, running, done, lost, failed
  std::string exit;                  // how it exited ("exit code 1", "signal SIGKILL")
  int replacement = 0;               // K for --on-rank-loss=replace's K-th replacement
  int dump_signal = 0;               // what makes it dump its flight recorder (its block says; 0: nothing)
  std::int64_t changed_ns = 0;       // steady clock: when `process` last changed (0: never)
  std::shared_ptr<monitor::BlockFile> block;
  std::shared_ptr<monitor::BlockReader> reader;
};

// The steady clock in ns: what LocalRank::changed_ns holds.
std::int64_t steady_now_ns();

// How many of each group's last collectives a sample carries: node 0 merges
// them by sequence number, so a sample it misses costs nothing while the
// next one still holds those operations.
inline constexpr std::size_t kRecentOps = 32;

// {"node", "host", "ranks": [{"rank", "local_rank", "host", "pid",
// "process", "exit", "groups": [{"name", "backend", "rank", "size",
// "timeout_ms", "closed", "running": {...} or null, "idle_ms", "last_id",
// "kinds": {KIND: {"ops", "failed", "bytes", "busy_s"}}, "recent": [{"seq",
// "kind", "dtype", "bytes", "dur_us", "ok"}]}]}]}
nlohmann::json sample_node(int node, std::vector<LocalRank>& ranks);

// One operation as the page shows it.
nlohmann::json op_json(const monitor::OpRecord& r, int group_size, std::int64_t now_ns);

}  // namespace mci::jobview
