// Node 0's view of the whole job, made from every node's samples
// (node_sample.hpp) and the launchers' events: one row per rank, the
// verdict the hang report would give if the job stopped now, each
// collective's arrival order and skew, a time series per operation kind,
// and the counters /metrics exports. Everything it keeps is bounded (a
// ring of points per kind, a window of operations per group, a list of
// events), so a week-long job holds no more than a minute-long one.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobview/job_model.hpp"

namespace mci::jobview {

struct ViewOptions {
  int world = 1;
  int nnodes = 1;
  std::chrono::milliseconds refresh{500};
  // A rank everyone else has waited for this long is "stalled" (marked in
  // its row and in the verdict); shorter when the group's timeout is.
  std::chrono::milliseconds stall_after{2000};
  std::string program;  // for the page's title
};

class JobView {
 public:
  explicit JobView(ViewOptions o);

  // A node's sample (node_sample.hpp). Thread-safe, as is everything here.
  void update(const NodeSample& node_sample);
  // The same, as it travels (job_model.hpp's JSON).
  void update(const nlohmann::json& node_sample) { update(node_sample.get<NodeSample>()); }
  // What a launcher saw: "rank_lost", "replacement", "restart", "shrink",
  // "grow", "rank_done", "job_end"; text for people.
  void event(const std::string& kind, const std::string& text);

  // The page's data (GET /api/v1/job), and Prometheus's (GET /metrics).
  nlohmann::json snapshot() const;
  std::string metrics() const;

  // Bounds, for tests and the docs.
  static constexpr std::size_t kSeriesPoints = 300;
  static constexpr std::size_t kOpsPerGroup = 256;
  static constexpr std::size_t kEvents = 200;

 private:
  struct Op {  // one collective, as the ranks that ran it reported it
    std::string kind, dtype;
    std::uint64_t bytes = 0;
    int size = 0;
    std::map<int, double> dur_us;  // global rank -> its own time in the call
    double end_s = -1;             // when it ended (the first report's), on the view's clock
    bool counted = false;          // its arrival is in the counters and series
  };
  struct Group {
    std::string name;
    int size = 0;
    std::map<std::uint64_t, Op> ops;  // by sequence number, the last kOpsPerGroup
  };
  struct Rank {
    bool seen = false;        // a sample of it has arrived
    RankSample sample;        // this rank's part of its node's last sample
    mutable RankSample view;  // the same, its times brought to now (age())
    int node = 0;
    std::chrono::steady_clock::time_point at;
    std::uint64_t last_arrivals = 0;  // collectives it entered last (as the monitor saw them)
  };
  struct Point {
    double t_s;
    std::uint64_t seq;
    double min_us, max_us, busbw_gbs;
    int last_rank;
  };
  struct Event {
    double t_s;
    std::string kind, text;
  };
  enum class State { starting, ok, slow, stalled, done };
  static std::string_view state_name(State s);
  struct Verdict {
    State state = State::starting;
    std::string text;
    int rank = -1;         // the rank everyone waits for, or the straggler
    double waiting_s = 0;  // how long the others have waited for it
    double timeout_s = 0;
  };

  double since_start_s() const;
  // Brings every rank's times (in an operation, idle) to now: a node's
  // sample is up to a refresh old when node 0 reads it.
  void age() const;
  // mu_ held. `t_s`: when it happened (seconds since the view started; by
  // default now); the list stays in that order, so a rank lost on another
  // node, learned a sample later, comes before the shrink it caused.
  void add_event(const std::string& kind, const std::string& text, std::optional<double> t_s = std::nullopt);
  void note_transition(int rank, const Rank& before, const RankSample& now);
  void finish_ops(Group& g);
  Verdict verdict() const;
  // The verdict's text when a rank is missing: what that rank is doing.
  std::string missing_text(const RankSample& r) const;
  // The verdict when no wait is in progress: a straggler, or in step.
  Verdict arrivals_verdict(std::uint64_t top, std::size_t nranks) const;
  std::optional<double> busbw(const Op& op) const;
  // The page's row of one rank (snapshot()'s "ranks").
  nlohmann::json rank_row(int rank, const Rank& rk, const Verdict& v) const;
  // The Prometheus text of the per-rank series (metrics()).
  std::string rank_metrics() const;

  ViewOptions o_;
  std::chrono::steady_clock::time_point started_;
  mutable std::mutex mu_;
  std::map<int, Rank> ranks_;
  std::map<std::string, Group> groups_;              // by "name/size"
  std::map<std::string, std::deque<Point>> series_;  // by kind
  std::map<std::string, double> skew_us_;            // by "group/kind": the last complete collective's
  std::deque<Event> events_;
  std::map<std::string, std::uint64_t> event_counts_;
  std::map<std::string, int> last_size_;  // group name -> its newest size, to tell a shrink or a grow
};

}  // namespace mci::jobview
