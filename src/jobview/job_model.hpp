// The typed model of a job as the monitor sees it: what a node's launcher
// samples of its ranks (NodeSample, built in node_sample.cpp), which node 0
// reads from the store and folds into its view (job_view.hpp). JSON exists
// only at the edges: a sample is encoded once for the store and decoded
// once where it arrives, tolerantly (a field missing or of another type
// takes its default; a sample from a newer mci loses only what it added),
// and the page's JSON is written from these types (docs/api/job.schema.json).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mci::jobview {

// A rank process as its launcher sees it.
enum class Process { starting, running, done, lost, failed };
std::string_view process_name(Process p);
// The name's process; starting for a name this build does not know.
Process process_from_name(std::string_view name);
// Lost or failed: gone with an error.
inline bool gone(Process p) { return p == Process::lost || p == Process::failed; }

// The operation a group runs now.
struct RunningOp {
  std::string kind, dtype, state;
  std::uint64_t seq = 0;  // 0: a point-to-point operation
  std::uint64_t bytes = 0;
  int peer = -1;  // a point-to-point operation's peer
  double for_ms = 0;
};

// One of a group's last completed (or failed) collectives.
struct RecentOp {
  std::uint64_t seq = 0, bytes = 0;
  std::string kind, dtype;
  std::string clock = "host";  // "cuda" when the device timed it
  double dur_us = 0, ago_ms = 0;
  bool ok = false;
};

// A group's counters for one operation kind.
struct KindCounters {
  std::uint64_t ops = 0, failed = 0, bytes = 0;
  double busy_s = 0;
};

// One process group of a rank.
struct GroupSample {
  std::string name, backend;
  int rank = 0, size = 0;
  double timeout_ms = 0;
  bool closed = false;
  std::optional<RunningOp> running;
  double idle_ms = 0;
  std::uint64_t last_id = 0;
  std::map<std::string, KindCounters> kinds;  // by kind name
  std::vector<RecentOp> recent;

  // The newest collective this group has entered: its running one, else
  // the newest it finished (what the hang report calls its position).
  std::uint64_t entered() const;
};

struct RankSample {
  int rank = -1, local_rank = 0;
  std::string host;
  std::int64_t pid = 0;
  Process process = Process::starting;
  std::string exit;                      // how it exited ("exit code 1", "signal SIGKILL")
  std::optional<double> changed_ago_ms;  // how long before the sample `process` changed
  int replacement = 0;                   // K for --on-rank-loss=replace's K-th replacement
  bool dumps = false;                    // it can dump its flight recorder on request
  std::vector<GroupSample> groups;       // the world group first

  // The group the page shows: the newest still open (after a shrink or a
  // grow the ranks move to the new group and close the old one), else the
  // last; null when the rank has none yet.
  const GroupSample* main_group() const;
};

struct NodeSample {
  int node = 0;
  std::string host;
  std::vector<RankSample> ranks;
};

void to_json(nlohmann::json& j, const RunningOp& o);
void from_json(const nlohmann::json& j, RunningOp& o);
void to_json(nlohmann::json& j, const RecentOp& o);
void from_json(const nlohmann::json& j, RecentOp& o);
void to_json(nlohmann::json& j, const KindCounters& c);
void from_json(const nlohmann::json& j, KindCounters& c);
void to_json(nlohmann::json& j, const GroupSample& g);
void from_json(const nlohmann::json& j, GroupSample& g);
void to_json(nlohmann::json& j, const RankSample& r);
void from_json(const nlohmann::json& j, RankSample& r);
void to_json(nlohmann::json& j, const NodeSample& n);
void from_json(const nlohmann::json& j, NodeSample& n);

}  // namespace mci::jobview
