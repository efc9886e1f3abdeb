#include "jobview/job_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/op_kind.hpp"
#include "jobview/bandwidth.hpp"
#include "monitor/positions.hpp"

namespace mci::jobview {

namespace {

using json = nlohmann::json;

std::string seconds_text(double s) { return s < 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s); }

std::string duration_text(double us) {
  if (us < 1e3) return fmt::format("{:.0f} µs", us);
  if (us < 1e6) return fmt::format("{:.0f} ms", us / 1e3);
  return fmt::format("{:.1f} s", us / 1e6);
}

// Prometheus label values: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

JobView::JobView(ViewOptions o) : o_(std::move(o)), started_(std::chrono::steady_clock::now()) {}

double JobView::since_start_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

std::string_view JobView::state_name(State s) {
  switch (s) {
    case State::starting: return "starting";
    case State::ok: return "ok";
    case State::slow: return "slow";
    case State::stalled: return "stalled";
    case State::done: return "done";
  }
  return "starting";
}

void JobView::update(const NodeSample& node_sample) {
  std::lock_guard lk(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (const RankSample& r : node_sample.ranks) {
    if (r.rank < 0) continue;
    Rank& rk = ranks_[r.rank];
    note_transition(r.rank, rk, r);
    rk.seen = true;
    rk.sample = r;
    rk.node = node_sample.node;
    rk.at = now;
    for (const GroupSample& g : r.groups) {
      const std::string key = fmt::format("{}/{}", g.name, g.size);
      // A group formed again under the same name with another size: the
      // job shrank or grew (said once). A subgroup has a name of its own.
      if (!groups_.contains(key)) {
        if (const auto was = last_size_.find(g.name); was != last_size_.end() && was->second != g.size) {
          add_event(g.size < was->second ? "shrink" : "grow",
                    fmt::format("group '{}' formed again with {} rank(s) (it had {})", g.name, g.size, was->second));
        }
        last_size_[g.name] = g.size;
      }
      Group& gr = groups_[key];
      gr.name = g.name;
      gr.size = g.size;
      for (const RecentOp& op : g.recent) {
        if (op.seq == 0 || !op.ok) continue;
        if (!gr.ops.empty() && op.seq + kOpsPerGroup < gr.ops.rbegin()->first) continue;  // fell out of the window
        Op& o = gr.ops[op.seq];
        o.kind = op.kind;
        o.dtype = op.dtype;
        o.bytes = op.bytes;
        o.size = g.size;
        o.dur_us[r.rank] = op.dur_us;
        if (o.end_s < 0) o.end_s = std::max(0.0, since_start_s() - op.ago_ms / 1e3);
      }
      while (gr.ops.size() > kOpsPerGroup) gr.ops.erase(gr.ops.begin());
      finish_ops(gr);
    }
  }
}

std::optional<double> JobView::busbw(const Op& op) const {
  if (op.dur_us.empty() || op.bytes == 0) return std::nullopt;
  double fastest = op.dur_us.begin()->second;
  for (const auto& [r, d] : op.dur_us) fastest = std::min(fastest, d);
  if (fastest <= 0) return std::nullopt;
  // The last rank to arrive waited least: its time is the transfer's own.
  return bus_bandwidth_gbs(op.kind, op.size, op.bytes, fastest / 1e6);
}

void JobView::finish_ops(Group& g) {
  for (auto& [seq, op] : g.ops) {
    if (op.counted || static_cast<int>(op.dur_us.size()) < op.size || op.size <= 0) continue;
    op.counted = true;
    auto last = std::min_element(op.dur_us.begin(), op.dur_us.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    double slowest = 0;
    for (const auto& [r, d] : op.dur_us) slowest = std::max(slowest, d);
    if (op.size > 1) ranks_[last->first].last_arrivals++;
    skew_us_[g.name + "/" + op.kind] = slowest - last->second;
    auto& s = series_[op.kind];
    s.push_back(Point{op.end_s, seq, last->second, slowest, busbw(op).value_or(0), last->first});
    while (s.size() > kSeriesPoints) s.pop_front();
  }
}

// What changed for a rank between two samples, as the job's events.
void JobView::note_transition(int rank, const Rank& before, const RankSample& now) {
  // When it happened, by the sampling node's clock (how long before its sample).
  const std::optional<double> when =
      now.changed_ago_ms ? std::optional<double>(since_start_s() - *now.changed_ago_ms / 1e3) : std::nullopt;
  const std::int64_t pid_was = before.seen ? before.sample.pid : 0;
  if (pid_was != 0 && now.pid != 0 && now.pid != pid_was) {
    if (now.replacement > 0) {
      add_event("replacement",
                fmt::format("rank {}: replacement {} started (pid {} on {})", rank, now.replacement, now.pid, now.host),
                when);
    } else {
      add_event("rank_started", fmt::format("rank {} started again (pid {} on {})", rank, now.pid, now.host), when);
    }
  }
  if (gone(now.process) && (!before.seen || before.sample.process != now.process)) {
    add_event("rank_lost", fmt::format("rank {} (pid {} on {}) was lost: {}", rank, now.pid, now.host, now.exit), when);
  }
}

void JobView::event(const std::string& kind, const std::string& text) {
  std::lock_guard lk(mu_);
  add_event(kind, text);
}

void JobView::add_event(const std::string& kind, const std::string& text, std::optional<double> t_s) {
  const double t = std::max(0.0, t_s.value_or(since_start_s()));
  const auto after =
      std::upper_bound(events_.begin(), events_.end(), t, [](double v, const Event& e) { return v < e.t_s; });
  events_.insert(after, Event{t, kind, text});
  while (events_.size() > kEvents) events_.pop_front();
  event_counts_[kind]++;
}

void JobView::age() const {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [rank, rk] : ranks_) {
    rk.view = rk.sample;
    if (rk.sample.process != Process::running) continue;
    const double ms = std::chrono::duration<double, std::milli>(now - rk.at).count();
    for (GroupSample& g : rk.view.groups) {
      if (g.running) {
        g.running->for_ms += ms;
      } else {
        g.idle_ms += ms;
      }
    }
  }
}

JobView::Verdict JobView::verdict() const {
  Verdict v;
  bool any_group = false, all_done = !ranks_.empty();
  double timeout_ms = 0;
  std::vector<monitor::RankPlace> places;
  std::map<std::string, int> kinds_at;  // what the ranks run, by kind, to find the position's
  for (const auto& [rank, rk] : ranks_) {
    const GroupSample* g = rk.view.main_group();
    any_group = any_group || g != nullptr;
    all_done = all_done && rk.view.process != Process::running && rk.view.process != Process::starting;
    monitor::RankPlace p;
    p.rank = rank;
    if (rk.view.process == Process::done) {
      p.life = monitor::Life::done;
    } else if (gone(rk.view.process)) {
      p.life = monitor::Life::lost;
    } else if (g == nullptr) {
      p.life = monitor::Life::no_group;
    }
    if (g != nullptr) {
      p.entered = g->entered();
      timeout_ms = std::max(timeout_ms, g->timeout_ms);
      if (g->running) {
        p.running_seq = g->running->seq;
        p.running = g->running->kind;
      }
    }
    places.push_back(std::move(p));
  }
  if (all_done) {
    v.state = State::done;
    v.text = "every rank has exited";
    return v;
  }
  if (!any_group) {
    v.text = "waiting for the ranks to create their process group";
    return v;
  }
  // The position is the furthest collective any rank entered; what it is,
  // the kind most of the ranks there run.
  const std::uint64_t top = monitor::furthest_position(places);
  for (const auto& p : places) {
    if (p.life == monitor::Life::alive && p.running_seq == top && top > 0) kinds_at[p.running]++;
  }
  std::string what;
  int most = 0;
  for (const auto& [kind, n] : kinds_at) {
    if (n > most) what = kind, most = n;
  }
  const monitor::Positions at = monitor::classify_positions(places, top, what);
  v.timeout_s = timeout_ms / 1e3;
  const double stall_ms = timeout_ms > 0 ? std::min<double>(static_cast<double>(o_.stall_after.count()), timeout_ms / 4)
                                         : static_cast<double>(o_.stall_after.count());
  // The ranks waiting in it, long enough to be a stall if one is missing.
  double waited_ms = 0;
  std::size_t waiting = 0;
  for (int rank : at.of(monitor::Where::waiting)) {
    const double ms = ranks_.at(rank).view.main_group()->running->for_ms;
    if (ms < stall_ms) continue;
    ++waiting;
    waited_ms = std::max(waited_ms, ms);
  }
  if (waiting > 0 && !at.missing.empty()) {
    const int m = at.missing.front();
    v.state = State::stalled;
    v.rank = m;
    v.waiting_s = waited_ms / 1e3;
    std::string others;
    for (std::size_t i = 1; i < at.missing.size() && i < 8; ++i) others += fmt::format(", {}", at.missing[i]);
    if (at.missing.size() > 8) others += ", ...";
    v.text = fmt::format("waiting {} of {} in {} #{} for rank {}{}, {}", seconds_text(v.waiting_s),
                         v.timeout_s > 0 ? seconds_text(v.timeout_s) : std::string("no timeout"), what, top, m,
                         others.empty() ? "" : " (and " + others.substr(2) + ")", missing_text(ranks_.at(m).view));
    return v;
  }
  if (waiting > 0) {
    v.state = State::slow;
    v.waiting_s = waited_ms / 1e3;
    v.text = fmt::format("every rank is in {} #{} for {}: a long transfer, no rank is missing", what, top,
                         seconds_text(v.waiting_s));
    return v;
  }
  return arrivals_verdict(top, places.size());
}

std::string JobView::missing_text(const RankSample& r) const {
  const GroupSample* g = r.main_group();
  if (gone(r.process)) return fmt::format("which was lost ({})", r.exit);
  if (g == nullptr) return fmt::format("which has not created its process group yet (on host {})", r.host);
  if (g->running) {
    const RunningOp& run = *g->running;
    return run.seq > 0 ? fmt::format("which is in {} #{} on host {}", run.kind, run.seq, r.host)
                       : fmt::format("which is in {} (peer {}) on host {}", run.kind, run.peer, r.host);
  }
  return fmt::format("which is running its own code since {} (its last collective was #{}) on host {}",
                     seconds_text(g->idle_ms / 1e3), g->entered(), r.host);
}

// No wait in progress: who has been arriving last, over the main group's
// last 10 complete collectives.
JobView::Verdict JobView::arrivals_verdict(std::uint64_t top, std::size_t nranks) const {
  Verdict v;
  const GroupSample* first = nullptr;
  for (const auto& [rank, rk] : ranks_) {
    if ((first = rk.view.main_group()) != nullptr) break;
  }
  const auto git = groups_.find(fmt::format("{}/{}", first->name, first->size));
  std::vector<const Op*> done;
  if (git != groups_.end()) {
    for (auto it = git->second.ops.rbegin(); it != git->second.ops.rend() && done.size() < 10; ++it) {
      if (it->second.counted && it->second.size > 1) done.push_back(&it->second);
    }
  }
  std::map<int, std::vector<double>> late;  // rank -> by how much it was last, each time
  for (const Op* op : done) {
    std::vector<std::pair<double, int>> d;
    for (const auto& [r, us] : op->dur_us) d.emplace_back(us, r);
    std::sort(d.begin(), d.end());
    late[d[0].second].push_back(d[1].first - d[0].first);
  }
  v.state = State::ok;
  for (auto& [rank, by] : late) {
    if (done.size() < 5 || by.size() * 10 < done.size() * 7) continue;
    std::sort(by.begin(), by.end());
    const double median = by[by.size() / 2];
    if (median < 5000) continue;  // under 5 ms: noise, not a slow step
    v.state = State::slow;
    v.rank = rank;
    v.text = fmt::format("rank {} arrives last by {} in {} of the last {} collectives", rank, duration_text(median),
                         by.size(), done.size());
    return v;
  }
  v.text = done.empty() ? fmt::format("{} rank(s) running", nranks)
                        : fmt::format("all {} ranks in step (last collective #{})", nranks, top);
  return v;
}

json JobView::rank_row(int rank, const Rank& rk, const Verdict& v) const {
  const RankSample& r = rk.view;
  const GroupSample* g = r.main_group();
  json row;
  row["rank"] = rank;
  row["node"] = rk.node;
  row["host"] = r.host;
  row["pid"] = r.pid;
  row["process"] = process_name(r.process);
  row["exit"] = r.exit;
  row["dumps"] = r.dumps;
  row["sample_age_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - rk.at).count();
  row["last_arrivals"] = rk.last_arrivals;
  row["waited_for"] = v.state == State::stalled && v.rank == rank;
  std::string state = "running";
  if (r.process == Process::done) {
    state = "done";
  } else if (gone(r.process)) {
    state = "lost";
  } else if (r.process == Process::starting || g == nullptr) {
    state = "starting";
  } else if (g->running) {
    const double stall_after = static_cast<double>(o_.stall_after.count());
    const double stall = g->timeout_ms > 0 ? std::min(stall_after, g->timeout_ms / 4) : stall_after;
    state = g->running->for_ms >= stall ? "waiting" : "in a collective";
  }
  row["state"] = state;
  row["group"] = g ? g->name : "";
  row["backend"] = g ? g->backend : "";
  row["op"] = g && g->running ? json(*g->running) : json(nullptr);
  row["idle_s"] = g ? g->idle_ms / 1e3 : 0.0;
  row["kinds"] = g && !g->kinds.empty() ? json(g->kinds) : json::object();
  json recent = json::array();
  if (g != nullptr) {
    const auto git = groups_.find(fmt::format("{}/{}", g->name, g->size));
    const auto& rec = g->recent;
    for (std::size_t i = rec.size() > 5 ? rec.size() - 5 : 0; i < rec.size(); ++i) {
      const RecentOp& op = rec[i];
      json e = {{"seq", op.seq}, {"kind", op.kind}, {"dur_us", op.dur_us}, {"clock", op.clock}, {"bytes", op.bytes}};
      const auto it =
          git != groups_.end() ? git->second.ops.find(op.seq) : std::map<std::uint64_t, Op>::const_iterator{};
      if (git != groups_.end() && it != git->second.ops.end() && it->second.counted) {
        const Op& o = it->second;
        // Arrival position: the rank that waited longest came first.
        int pos = 1;
        const double mine = o.dur_us.count(rank) ? o.dur_us.at(rank) : 0;
        for (const auto& [other, d] : o.dur_us) pos += d > mine ? 1 : 0;
        e["arrival"] = pos;
        e["busbw_gbs"] = busbw(o).value_or(0);
      }
      recent.push_back(std::move(e));
    }
  }
  row["recent"] = std::move(recent);
  return row;
}

nlohmann::json JobView::snapshot() const {
  std::lock_guard lk(mu_);
  age();
  const Verdict v = verdict();
  json out;
  out["job"] = {{"world", o_.world},
                {"nnodes", o_.nnodes},
                {"program", o_.program},
                {"uptime_s", since_start_s()},
                {"refresh_ms", o_.refresh.count()},
                {"stall_after_ms", o_.stall_after.count()}};
  out["verdict"] = {{"state", state_name(v.state)},
                    {"text", v.text},
                    {"rank", v.rank},
                    {"waiting_s", v.waiting_s},
                    {"timeout_s", v.timeout_s}};
  json ranks = json::array();
  for (const auto& [rank, rk] : ranks_) ranks.push_back(rank_row(rank, rk, v));
  out["ranks"] = std::move(ranks);
  json groups = json::array();
  for (const auto& [key, g] : groups_) {
    json ops = json::array();
    int n = 0;
    for (auto it = g.ops.rbegin(); it != g.ops.rend() && n < 20; ++it) {
      const Op& o = it->second;
      if (!o.counted) continue;
      ++n;
      std::vector<std::pair<double, int>> d;
      for (const auto& [r, us] : o.dur_us) d.emplace_back(-us, r);
      std::sort(d.begin(), d.end());
      json order = json::array();
      for (const auto& [us, r] : d) order.push_back(r);
      ops.push_back({{"seq", it->first},
                     {"kind", o.kind},
                     {"dtype", o.dtype},
                     {"bytes", o.bytes},
                     {"min_us", -d.back().first},
                     {"max_us", -d.front().first},
                     {"busbw_gbs", busbw(o).value_or(0)},
                     {"arrival", std::move(order)}});
    }
    groups.push_back({{"name", g.name}, {"size", g.size}, {"ops", std::move(ops)}});
  }
  out["groups"] = std::move(groups);
  json series = json::object();
  for (const auto& [kind, pts] : series_) {
    json a = json::array();
    for (const auto& p : pts) {
      a.push_back({{"t", p.t_s},
                   {"seq", p.seq},
                   {"min_us", p.min_us},
                   {"max_us", p.max_us},
                   {"busbw_gbs", p.busbw_gbs},
                   {"last_rank", p.last_rank}});
    }
    series[kind] = std::move(a);
  }
  out["series"] = std::move(series);
  json events = json::array();
  for (const auto& e : events_) events.push_back({{"t", e.t_s}, {"kind", e.kind}, {"text", e.text}});
  out["events"] = std::move(events);
  return out;
}

namespace {
// A gauge's value to 6 significant digits: a computed time or bandwidth
// printed whole reads 2.1131273900000003.
std::string gauge(double v) { return fmt::format("{:.6g}", v); }

void help(std::string& out, const char* name, const char* type, const char* what) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, what, name, type);
}

}  // namespace

std::string JobView::rank_metrics() const {
  std::string out;
  // NCCL Inspector's three, per rank and operation: the last one's.
  struct Last {
    double exec_us, algbw, busbw;
  };
  std::map<std::string, Last> last;  // by label set
  for (const auto& [rank, rk] : ranks_) {
    const GroupSample* g = rk.view.main_group();
    if (g == nullptr) continue;
    for (const RecentOp& op : g->recent) {
      const std::string labels = fmt::format("rank=\"{}\",node=\"{}\",group=\"{}\",collective=\"{}\",dtype=\"{}\"",
                                             rank, rk.node, label(g->name), label(op.kind), label(op.dtype));
      const double algbw = op.dur_us > 0 ? static_cast<double>(op.bytes) / 1e3 / op.dur_us : 0;
      last[labels] = Last{op.dur_us, algbw, bus_bandwidth_gbs(op.kind, g->size, op.bytes, op.dur_us / 1e6)};
    }
  }
  help(out, "mci_collective_exec_time_microseconds", "gauge", "Time of the rank's last call of this collective");
  for (const auto& [l, v] : last)
    out += fmt::format("mci_collective_exec_time_microseconds{{{}}} {}\n", l, gauge(v.exec_us));
  help(out, "mci_algorithm_bandwidth_gbs", "gauge", "Bytes over time of the rank's last call (GB/s)");
  for (const auto& [l, v] : last) out += fmt::format("mci_algorithm_bandwidth_gbs{{{}}} {}\n", l, gauge(v.algbw));
  help(out, "mci_bus_bandwidth_gbs", "gauge", "Bus bandwidth of the rank's last call, nccl-tests' busbw (GB/s)");
  for (const auto& [l, v] : last) out += fmt::format("mci_bus_bandwidth_gbs{{{}}} {}\n", l, gauge(v.busbw));

  help(out, "mci_collectives_total", "counter", "Operations the rank completed, by kind");
  std::string bytes_lines, secs_lines, failed_lines;
  for (const auto& [rank, rk] : ranks_) {
    const GroupSample* g = rk.view.main_group();
    if (g == nullptr) continue;
    for (const auto& [kind, c] : g->kinds) {
      const std::string l = fmt::format("rank=\"{}\",node=\"{}\",group=\"{}\",collective=\"{}\"", rank, rk.node,
                                        label(g->name), label(kind));
      out += fmt::format("mci_collectives_total{{{}}} {}\n", l, c.ops);
      failed_lines += fmt::format("mci_collectives_failed_total{{{}}} {}\n", l, c.failed);
      bytes_lines += fmt::format("mci_collective_bytes_total{{{}}} {}\n", l, c.bytes);
      secs_lines += fmt::format("mci_collective_wait_seconds_total{{{}}} {}\n", l, c.busy_s);
    }
  }
  help(out, "mci_collectives_failed_total", "counter", "Operations that failed on the rank, by kind");
  out += failed_lines;
  help(out, "mci_collective_bytes_total", "counter", "Bytes moved (nccl-tests' size of each operation), by kind");
  out += bytes_lines;
  help(out, "mci_collective_wait_seconds_total", "counter", "Time the rank spent inside collectives, waiting included");
  out += secs_lines;
  return out;
}

std::string JobView::metrics() const {
  std::lock_guard lk(mu_);
  age();
  const Verdict v = verdict();
  std::string out = rank_metrics();
  help(out, "mci_arrival_skew_microseconds", "gauge", "First to last arrival of the last complete collective");
  for (const auto& [k, us] : skew_us_) {
    const auto slash = k.rfind('/');
    out += fmt::format("mci_arrival_skew_microseconds{{group=\"{}\",collective=\"{}\"}} {}\n",
                       label(k.substr(0, slash)), label(k.substr(slash + 1)), gauge(us));
  }
  help(out, "mci_last_to_arrive_total", "counter", "Collectives the rank entered last (of those the monitor saw)");
  for (const auto& [rank, rk] : ranks_) {
    out += fmt::format("mci_last_to_arrive_total{{rank=\"{}\",node=\"{}\"}} {}\n", rank, rk.node, rk.last_arrivals);
  }
  help(out, "mci_rank_up", "gauge", "1 while the rank's process runs");
  for (const auto& [rank, rk] : ranks_) {
    const Process p = rk.view.process;
    out += fmt::format("mci_rank_up{{rank=\"{}\",node=\"{}\"}} {}\n", rank, rk.node,
                       p == Process::running || p == Process::starting ? 1 : 0);
  }
  help(out, "mci_hang_state", "gauge", "0 in step, 1 slow (a straggler or a long wait), 2 stalled (a rank is missing)");
  out += fmt::format("mci_hang_state {}\n", v.state == State::stalled ? 2 : v.state == State::slow ? 1 : 0);
  help(out, "mci_hang_waiting_seconds", "gauge", "How long ranks have waited in the current collective");
  out += fmt::format("mci_hang_waiting_seconds {}\n", gauge(v.waiting_s));
  help(out, "mci_hang_rank", "gauge", "The rank the others wait for, or the straggler; -1 if none");
  out += fmt::format("mci_hang_rank {}\n", v.rank);
  auto count = [&](const char* k) {
    const auto it = event_counts_.find(k);
    return it == event_counts_.end() ? 0 : it->second;
  };
  help(out, "mci_ranks_lost_total", "counter", "Rank processes lost (a non-zero exit or a signal)");
  out += fmt::format("mci_ranks_lost_total {}\n", count("rank_lost"));
  help(out, "mci_recoveries_total", "counter",
       "Groups formed again after a loss (shrink, grow) and replacements started");
  out += fmt::format("mci_recoveries_total {}\n", count("shrink") + count("grow") + count("replacement"));
  help(out, "mci_restarts_total", "counter", "Restarts of every process (--max-restarts)");
  out += fmt::format("mci_restarts_total {}\n", count("restart"));
  return out;
}

}  // namespace mci::jobview
