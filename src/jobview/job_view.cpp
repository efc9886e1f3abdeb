#include "jobview/job_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/op_kind.hpp"
#include "jobview/bandwidth.hpp"

namespace mci::jobview {

namespace {

using json = nlohmann::json;

double num(const json& j, const char* key, double fallback = 0) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool gone(const std::string& process) { return process == "lost" || process == "failed"; }

// The collective a rank has entered last (its running one, else the newest
// it finished): what the hang report calls its position.
std::uint64_t entered(const json& g) {
  const json& run = g["running"];
  if (run.is_object() && num(run, "seq") > 0) return static_cast<std::uint64_t>(num(run, "seq"));
  std::uint64_t top = 0;
  for (const auto& r : g["recent"]) top = std::max(top, static_cast<std::uint64_t>(num(r, "seq")));
  return top;
}

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

const json* JobView::main_group(const json& rank_sample) {
  const auto it = rank_sample.find("groups");
  if (it == rank_sample.end() || !it->is_array()) return nullptr;
  // The newest group still open: after a shrink or a grow the ranks move
  // to the new group, and the old one is closed.
  const json* pick = nullptr;
  for (const auto& g : *it) {
    if (!g.value("closed", false)) pick = &g;
  }
  if (pick == nullptr && !it->empty()) pick = &it->back();
  return pick;
}

void JobView::update(const json& node_sample) {
  std::lock_guard lk(mu_);
  const auto now = std::chrono::steady_clock::now();
  const int node = static_cast<int>(num(node_sample, "node"));
  if (!node_sample.contains("ranks") || !node_sample["ranks"].is_array()) return;
  for (const auto& r : node_sample["ranks"]) {
    if (!r.is_object()) continue;
    const int rank = static_cast<int>(num(r, "rank", -1));
    if (rank < 0) continue;
    Rank& rk = ranks_[rank];
    note_transition(rank, rk.sample, r);
    rk.sample = r;
    rk.node = node;
    rk.at = now;
    if (!r.contains("groups") || !r["groups"].is_array()) continue;
    for (const auto& g : r["groups"]) {
      const std::string name = str(g, "name");
      const int size = static_cast<int>(num(g, "size"));
      const std::string key = fmt::format("{}/{}", name, size);
      // A group formed again under the same name with another size: the
      // job shrank or grew (said once). A subgroup has a name of its own.
      if (!groups_.contains(key)) {
        if (const auto was = last_size_.find(name); was != last_size_.end() && was->second != size) {
          add_event(size < was->second ? "shrink" : "grow",
                    fmt::format("group '{}' formed again with {} rank(s) (it had {})", name, size, was->second));
        }
        last_size_[name] = size;
      }
      Group& gr = groups_[key];
      gr.name = name;
      gr.size = size;
      for (const auto& op : g["recent"]) {
        const auto seq = static_cast<std::uint64_t>(num(op, "seq"));
        if (seq == 0 || !op.value("ok", false)) continue;
        if (!gr.ops.empty() && seq + kOpsPerGroup < gr.ops.rbegin()->first) continue;  // fell out of the window
        Op& o = gr.ops[seq];
        o.kind = str(op, "kind");
        o.dtype = str(op, "dtype");
        o.bytes = static_cast<std::uint64_t>(num(op, "bytes"));
        o.size = size;
        o.dur_us[rank] = num(op, "dur_us");
        if (o.end_s < 0) o.end_s = std::max(0.0, since_start_s() - num(op, "ago_ms") / 1e3);
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
void JobView::note_transition(int rank, const json& before, const json& now) {
  // When it happened, by the sampling node's clock (how long before its sample).
  const std::optional<double> when = now.contains("changed_ago_ms")
                                         ? std::optional<double>(since_start_s() - num(now, "changed_ago_ms") / 1e3)
                                         : std::nullopt;
  const std::string was = before.is_object() ? str(before, "process") : "";
  const std::string is = str(now, "process");
  const double pid_was = before.is_object() ? num(before, "pid") : 0;
  const double pid = num(now, "pid");
  if (pid_was != 0 && pid != 0 && pid != pid_was) {
    const int k = static_cast<int>(num(now, "replacement"));
    if (k > 0) {
      add_event("replacement",
                fmt::format("rank {}: replacement {} started (pid {:.0f} on {})", rank, k, pid, str(now, "host")),
                when);
    } else {
      add_event("rank_started", fmt::format("rank {} started again (pid {:.0f} on {})", rank, pid, str(now, "host")),
                when);
    }
  }
  if (is != was && gone(is)) {
    add_event("rank_lost",
              fmt::format("rank {} (pid {:.0f} on {}) was lost: {}", rank, pid, str(now, "host"), str(now, "exit")),
              when);
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
    if (str(rk.sample, "process") != "running") continue;
    const double ms = std::chrono::duration<double, std::milli>(now - rk.at).count();
    auto it = rk.view.find("groups");
    if (it == rk.view.end() || !it->is_array()) continue;
    for (auto& g : *it) {
      if (g.contains("running") && g["running"].is_object()) g["running"]["for_ms"] = num(g["running"], "for_ms") + ms;
      if (g.contains("idle_ms") && g["running"].is_null()) g["idle_ms"] = num(g, "idle_ms") + ms;
    }
  }
}

JobView::Verdict JobView::verdict() const {
  Verdict v;
  struct Seen {
    int rank;
    const json* sample;
    const json* g;
  };
  std::vector<Seen> all;
  bool any_group = false, all_done = !ranks_.empty();
  for (const auto& [rank, rk] : ranks_) {
    const json* g = main_group(rk.view);
    any_group = any_group || g != nullptr;
    all_done = all_done && str(rk.view, "process") != "running" && str(rk.view, "process") != "starting";
    all.push_back({rank, &rk.view, g});
  }
  if (all_done) {
    v.state = "done";
    v.text = "every rank has exited";
    return v;
  }
  if (!any_group) {
    v.text = "waiting for the ranks to create their process group";
    return v;
  }
  std::uint64_t top = 0;
  double timeout_ms = 0;
  for (const auto& s : all) {
    if (s.g == nullptr) continue;
    top = std::max(top, entered(*s.g));
    timeout_ms = std::max(timeout_ms, num(*s.g, "timeout_ms"));
  }
  v.timeout_s = timeout_ms / 1e3;
  const double stall_ms = timeout_ms > 0 ? std::min<double>(static_cast<double>(o_.stall_after.count()), timeout_ms / 4)
                                         : static_cast<double>(o_.stall_after.count());
  double waited_ms = 0;
  std::string kind_at_top;
  std::vector<const Seen*> waiting, missing;
  for (const auto& s : all) {
    const std::string process = str(*s.sample, "process");
    if (s.g == nullptr) {
      if (process != "done") missing.push_back(&s);
      continue;
    }
    const json& run = (*s.g)["running"];
    if (gone(process) || entered(*s.g) < top) {
      if (process != "done") missing.push_back(&s);
    } else if (run.is_object() && num(run, "seq") == static_cast<double>(top) && num(run, "for_ms") >= stall_ms) {
      waiting.push_back(&s);
      waited_ms = std::max(waited_ms, num(run, "for_ms"));
      kind_at_top = str(run, "kind");
    }
  }
  if (!waiting.empty() && !missing.empty()) {
    const Seen& m = *missing.front();
    v.state = "stalled";
    v.rank = m.rank;
    v.waiting_s = waited_ms / 1e3;
    std::string what;
    const std::string host = str(*m.sample, "host");
    const std::string process = str(*m.sample, "process");
    if (gone(process)) {
      what = fmt::format("which was lost ({})", str(*m.sample, "exit"));
    } else if (m.g == nullptr) {
      what = fmt::format("which has not created its process group yet (on host {})", host);
    } else if (const json& run = (*m.g)["running"]; run.is_object()) {
      const double seq = num(run, "seq");
      what = seq > 0 ? fmt::format("which is in {} #{} on host {}", str(run, "kind"), seq, host)
                     : fmt::format("which is in {} (peer {}) on host {}", str(run, "kind"), num(run, "peer"), host);
    } else {
      what = fmt::format("which is running its own code since {} (its last collective was #{}) on host {}",
                         seconds_text(num(*m.g, "idle_ms") / 1e3), entered(*m.g), host);
    }
    std::string others;
    for (std::size_t i = 1; i < missing.size() && i < 8; ++i) others += fmt::format(", {}", missing[i]->rank);
    if (missing.size() > 8) others += ", ...";
    v.text = fmt::format("waiting {} of {} in {} #{} for rank {}{}, {}", seconds_text(v.waiting_s),
                         v.timeout_s > 0 ? seconds_text(v.timeout_s) : std::string("no timeout"), kind_at_top, top,
                         m.rank, others.empty() ? "" : " (and " + others.substr(2) + ")", what);
    return v;
  }
  if (!waiting.empty()) {
    v.state = "slow";
    v.waiting_s = waited_ms / 1e3;
    v.text = fmt::format("every rank is in {} #{} for {}: a long transfer, no rank is missing", kind_at_top, top,
                         seconds_text(v.waiting_s));
    return v;
  }
  // No wait in progress: who has been arriving last, over the main
  // group's last 10 complete collectives.
  const Seen* first = nullptr;
  for (const auto& s : all) {
    if (s.g != nullptr) {
      first = &s;
      break;
    }
  }
  const auto git = groups_.find(fmt::format("{}/{}", str(*first->g, "name"), static_cast<int>(num(*first->g, "size"))));
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
  v.state = "ok";
  for (auto& [rank, by] : late) {
    if (done.size() < 5 || by.size() * 10 < done.size() * 7) continue;
    std::sort(by.begin(), by.end());
    const double median = by[by.size() / 2];
    if (median < 5000) continue;  // under 5 ms: noise, not a slow step
    v.state = "slow";
    v.rank = rank;
    v.text = fmt::format("rank {} arrives last by {} in {} of the last {} collectives", rank, duration_text(median),
                         by.size(), done.size());
    return v;
  }
  v.text = done.empty() ? fmt::format("{} rank(s) running", all.size())
                        : fmt::format("all {} ranks in step (last collective #{})", all.size(), top);
  return v;
}

nlohmann::json JobView::snapshot() const {
  std::lock_guard lk(mu_);
  age();
  const Verdict v = verdict();
  const auto now = std::chrono::steady_clock::now();
  json out;
  out["job"] = {{"world", o_.world},
                {"nnodes", o_.nnodes},
                {"program", o_.program},
                {"uptime_s", since_start_s()},
                {"refresh_ms", o_.refresh.count()},
                {"stall_after_ms", o_.stall_after.count()}};
  out["verdict"] = {{"state", v.state},
                    {"text", v.text},
                    {"rank", v.rank},
                    {"waiting_s", v.waiting_s},
                    {"timeout_s", v.timeout_s}};
  json ranks = json::array();
  for (const auto& [rank, rk] : ranks_) {
    const json* g = main_group(rk.view);
    const std::string process = str(rk.view, "process");
    json row;
    row["rank"] = rank;
    row["node"] = rk.node;
    row["host"] = str(rk.view, "host");
    // An integer, as the docs show it (os.kill() refuses 10233.0).
    row["pid"] = static_cast<std::int64_t>(num(rk.view, "pid"));
    row["process"] = process;
    row["exit"] = str(rk.view, "exit");
    row["dumps"] = rk.view.value("dumps", false);
    row["sample_age_s"] = std::chrono::duration<double>(now - rk.at).count();
    row["last_arrivals"] = rk.last_arrivals;
    row["waited_for"] = v.state == "stalled" && v.rank == rank;
    std::string state = "running";
    if (process == "done") {
      state = "done";
    } else if (gone(process)) {
      state = "lost";
    } else if (process == "starting" || g == nullptr) {
      state = "starting";
    } else if (const json& run = (*g)["running"]; run.is_object()) {
      const double stall =
          std::min<double>(static_cast<double>(o_.stall_after.count()), num(*g, "timeout_ms", 1e12) / 4);
      state = num(run, "for_ms") >= stall ? "waiting" : "in a collective";
    }
    row["state"] = state;
    row["group"] = g ? str(*g, "name") : "";
    row["backend"] = g ? str(*g, "backend") : "";
    row["op"] = g ? (*g)["running"] : json(nullptr);
    row["idle_s"] = g ? num(*g, "idle_ms") / 1e3 : 0.0;
    row["kinds"] = g ? (*g)["kinds"] : json::object();
    json recent = json::array();
    if (g != nullptr) {
      const auto git = groups_.find(fmt::format("{}/{}", str(*g, "name"), static_cast<int>(num(*g, "size"))));
      const auto& rec = (*g)["recent"];
      for (std::size_t i = rec.size() > 5 ? rec.size() - 5 : 0; i < rec.size(); ++i) {
        const json& op = rec[i];
        json e = {{"seq", op["seq"]},
                  {"kind", op["kind"]},
                  {"dur_us", op["dur_us"]},
                  {"clock", op.value("clock", "host")},
                  {"bytes", op["bytes"]}};
        if (git != groups_.end()) {
          if (auto it = git->second.ops.find(static_cast<std::uint64_t>(num(op, "seq"))); it != git->second.ops.end()) {
            const Op& o = it->second;
            if (o.counted) {
              // Arrival position: the rank that waited longest came first.
              int pos = 1;
              const double mine = o.dur_us.count(rank) ? o.dur_us.at(rank) : 0;
              for (const auto& [r, d] : o.dur_us) pos += d > mine ? 1 : 0;
              e["arrival"] = pos;
              e["busbw_gbs"] = busbw(o).value_or(0);
            }
          }
        }
        recent.push_back(std::move(e));
      }
    }
    row["recent"] = std::move(recent);
    ranks.push_back(std::move(row));
  }
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
}  // namespace

std::string JobView::metrics() const {
  const json j = snapshot();  // takes the lock itself
  std::lock_guard lk(mu_);
  std::string out;
  auto help = [&](const char* name, const char* type, const char* what) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, what, name, type);
  };
  // NCCL Inspector's three, per rank and operation: the last one's.
  struct Last {
    double exec_us, algbw, busbw;
  };
  std::map<std::string, Last> last;  // by label set
  for (const auto& [rank, rk] : ranks_) {
    const json* g = main_group(rk.view);
    if (g == nullptr) continue;
    for (const auto& op : (*g)["recent"]) {
      const double us = num(op, "dur_us");
      const auto bytes = static_cast<std::uint64_t>(num(op, "bytes"));
      const int size = static_cast<int>(num(*g, "size"));
      const std::string labels =
          fmt::format("rank=\"{}\",node=\"{}\",group=\"{}\",collective=\"{}\",dtype=\"{}\"", rank, rk.node,
                      label(str(*g, "name")), label(str(op, "kind")), label(str(op, "dtype")));
      const double algbw = us > 0 ? static_cast<double>(bytes) / 1e3 / us : 0;
      last[labels] = Last{us, algbw, bus_bandwidth_gbs(str(op, "kind"), size, bytes, us / 1e6)};
    }
  }
  help("mci_collective_exec_time_microseconds", "gauge", "Time of the rank's last call of this collective");
  for (const auto& [l, v] : last)
    out += fmt::format("mci_collective_exec_time_microseconds{{{}}} {}\n", l, gauge(v.exec_us));
  help("mci_algorithm_bandwidth_gbs", "gauge", "Bytes over time of the rank's last call (GB/s)");
  for (const auto& [l, v] : last) out += fmt::format("mci_algorithm_bandwidth_gbs{{{}}} {}\n", l, gauge(v.algbw));
  help("mci_bus_bandwidth_gbs", "gauge", "Bus bandwidth of the rank's last call, nccl-tests' busbw (GB/s)");
  for (const auto& [l, v] : last) out += fmt::format("mci_bus_bandwidth_gbs{{{}}} {}\n", l, gauge(v.busbw));

  help("mci_collectives_total", "counter", "Operations the rank completed, by kind");
  std::string bytes_lines, secs_lines, failed_lines;
  for (const auto& [rank, rk] : ranks_) {
    const json* g = main_group(rk.view);
    if (g == nullptr) continue;
    for (const auto& [kind, c] : (*g)["kinds"].items()) {
      const std::string l = fmt::format("rank=\"{}\",node=\"{}\",group=\"{}\",collective=\"{}\"", rank, rk.node,
                                        label(str(*g, "name")), label(kind));
      out += fmt::format("mci_collectives_total{{{}}} {}\n", l, num(c, "ops"));
      failed_lines += fmt::format("mci_collectives_failed_total{{{}}} {}\n", l, num(c, "failed"));
      bytes_lines += fmt::format("mci_collective_bytes_total{{{}}} {}\n", l, num(c, "bytes"));
      secs_lines += fmt::format("mci_collective_wait_seconds_total{{{}}} {}\n", l, num(c, "busy_s"));
    }
  }
  help("mci_collectives_failed_total", "counter", "Operations that failed on the rank, by kind");
  out += failed_lines;
  help("mci_collective_bytes_total", "counter", "Bytes moved (nccl-tests' size of each operation), by kind");
  out += bytes_lines;
  help("mci_collective_wait_seconds_total", "counter", "Time the rank spent inside collectives, waiting included");
  out += secs_lines;
  help("mci_arrival_skew_microseconds", "gauge", "First to last arrival of the last complete collective");
  for (const auto& [k, us] : skew_us_) {
    const auto slash = k.rfind('/');
    out += fmt::format("mci_arrival_skew_microseconds{{group=\"{}\",collective=\"{}\"}} {}\n",
                       label(k.substr(0, slash)), label(k.substr(slash + 1)), gauge(us));
  }
  help("mci_last_to_arrive_total", "counter", "Collectives the rank entered last (of those the monitor saw)");
  for (const auto& [rank, rk] : ranks_) {
    out += fmt::format("mci_last_to_arrive_total{{rank=\"{}\",node=\"{}\"}} {}\n", rank, rk.node, rk.last_arrivals);
  }
  help("mci_rank_up", "gauge", "1 while the rank's process runs");
  for (const auto& [rank, rk] : ranks_) {
    const std::string p = str(rk.view, "process");
    out += fmt::format("mci_rank_up{{rank=\"{}\",node=\"{}\"}} {}\n", rank, rk.node,
                       p == "running" || p == "starting" ? 1 : 0);
  }
  const auto& v = j["verdict"];
  const std::string state = str(v, "state");
  help("mci_hang_state", "gauge", "0 in step, 1 slow (a straggler or a long wait), 2 stalled (a rank is missing)");
  out += fmt::format("mci_hang_state {}\n", state == "stalled" ? 2 : state == "slow" ? 1 : 0);
  help("mci_hang_waiting_seconds", "gauge", "How long ranks have waited in the current collective");
  out += fmt::format("mci_hang_waiting_seconds {}\n", gauge(num(v, "waiting_s")));
  help("mci_hang_rank", "gauge", "The rank the others wait for, or the straggler; -1 if none");
  out += fmt::format("mci_hang_rank {}\n", num(v, "rank", -1));
  auto count = [&](const char* k) {
    const auto it = event_counts_.find(k);
    return it == event_counts_.end() ? 0 : it->second;
  };
  help("mci_ranks_lost_total", "counter", "Rank processes lost (a non-zero exit or a signal)");
  out += fmt::format("mci_ranks_lost_total {}\n", count("rank_lost"));
  help("mci_recoveries_total", "counter", "Groups formed again after a loss (shrink, grow) and replacements started");
  out += fmt::format("mci_recoveries_total {}\n", count("shrink") + count("grow") + count("replacement"));
  help("mci_restarts_total", "counter", "Restarts of every process (--max-restarts)");
  out += fmt::format("mci_restarts_total {}\n", count("restart"));
  return out;
}

}  // namespace mci::jobview
