// What one node's launcher knows of its ranks at one moment, read from
// their status blocks (monitor/status_block.hpp) plus what only the
// launcher knows (the process's state, how it exited), as the NodeSample
// that node 0 aggregates: read directly on node 0, through the job's store
// (its JSON, one key per node, set once per refresh) from the others.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jobview/job_model.hpp"
#include "monitor/status_block.hpp"

namespace mci::jobview {

// A rank process as its launcher sees it.
struct LocalRank {
  int rank = 0;
  int local_rank = 0;
  std::int64_t pid = 0;
  Process process = Process::starting;
  std::string exit;             // how it exited ("exit code 1", "signal SIGKILL")
  int replacement = 0;          // K for --on-rank-loss=replace's K-th replacement
  int dump_signal = 0;          // what makes it dump its flight recorder (its block says; 0: nothing)
  std::int64_t changed_ns = 0;  // steady clock: when `process` last changed (0: never)
  std::shared_ptr<monitor::BlockFile> block;
  std::shared_ptr<monitor::BlockReader> reader;
};

// The steady clock in ns: what LocalRank::changed_ns holds.
std::int64_t steady_now_ns();

// How many of each group's last collectives a sample carries: node 0 merges
// them by sequence number, so a sample it misses costs nothing while the
// next one still holds those operations.
inline constexpr std::size_t kRecentOps = 32;

// What the node's ranks are doing now (job_model.hpp).
NodeSample sample_node(int node, std::vector<LocalRank>& ranks);

// One operation as the page shows it.
RunningOp running_op(const monitor::OpRecord& r, int group_size, std::int64_t now_ns);

}  // namespace mci::jobview
