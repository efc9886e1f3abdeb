#include "jobview/job_model.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

namespace mci::jobview {

namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 5> kProcessNames{"starting", "running", "done", "lost", "failed"};

// A field read tolerantly: absent, null or of another type gives `fallback`
// (a sample is input from another process, maybe another build).
template <typename T>
T field(const json& j, const char* key, T fallback = T{}) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else if constexpr (std::is_floating_point_v<T>) {
    return it->is_number() ? it->get<T>() : fallback;
  } else {
    // An integer field: a number out of the type's range, or not a whole
    // number's worth of one (NaN), takes the fallback; a fraction its whole part.
    if (!it->is_number()) return fallback;
    if (it->is_number_integer()) {
      if (it->is_number_unsigned()) {
        const auto v = it->get<std::uint64_t>();
        return v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()) ? static_cast<T>(v) : fallback;
      }
      const auto v = it->get<std::int64_t>();
      return v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                     (v < 0 ||
                      static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
                 ? static_cast<T>(v)
                 : fallback;
    }
    const double v = it->get<double>();
    return v >= static_cast<double>(std::numeric_limits<T>::min()) &&
                   v < static_cast<double>(std::numeric_limits<T>::max())
               ? static_cast<T>(v)
               : fallback;
  }
}

template <typename T>
std::vector<T> list(const json& j, const char* key) {
  std::vector<T> out;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& e : *it) {
    if (e.is_object()) out.push_back(e.get<T>());
  }
  return out;
}

}  // namespace

std::string_view process_name(Process p) { return kProcessNames[static_cast<std::size_t>(p)]; }

Process process_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kProcessNames.size(); ++i) {
    if (kProcessNames[i] == name) return static_cast<Process>(i);
  }
  return Process::starting;
}

std::uint64_t GroupSample::entered() const {
  if (running && running->seq > 0) return running->seq;
  std::uint64_t top = 0;
  for (const auto& r : recent) top = std::max(top, r.seq);
  return top;
}

const GroupSample* RankSample::main_group() const {
  const GroupSample* pick = nullptr;
  for (const auto& g : groups) {
    if (!g.closed) pick = &g;
  }
  if (pick == nullptr && !groups.empty()) pick = &groups.back();
  return pick;
}

void to_json(json& j, const RunningOp& o) {
  j = {{"kind", o.kind},   {"seq", o.seq},   {"dtype", o.dtype},  {"bytes", o.bytes},
       {"state", o.state}, {"peer", o.peer}, {"for_ms", o.for_ms}};
}

void from_json(const json& j, RunningOp& o) {
  o.kind = field<std::string>(j, "kind");
  o.seq = field<std::uint64_t>(j, "seq");
  o.dtype = field<std::string>(j, "dtype");
  o.bytes = field<std::uint64_t>(j, "bytes");
  o.state = field<std::string>(j, "state");
  o.peer = field<int>(j, "peer", -1);
  o.for_ms = field<double>(j, "for_ms");
}

void to_json(json& j, const RecentOp& o) {
  j = {{"seq", o.seq},       {"kind", o.kind},   {"dtype", o.dtype},   {"bytes", o.bytes},
       {"dur_us", o.dur_us}, {"clock", o.clock}, {"ago_ms", o.ago_ms}, {"ok", o.ok}};
}

void from_json(const json& j, RecentOp& o) {
  o.seq = field<std::uint64_t>(j, "seq");
  o.kind = field<std::string>(j, "kind");
  o.dtype = field<std::string>(j, "dtype");
  o.bytes = field<std::uint64_t>(j, "bytes");
  o.dur_us = field<double>(j, "dur_us");
  o.clock = field<std::string>(j, "clock", "host");
  o.ago_ms = field<double>(j, "ago_ms");
  o.ok = field<bool>(j, "ok");
}

void to_json(json& j, const KindCounters& c) {
  j = {{"ops", c.ops}, {"failed", c.failed}, {"bytes", c.bytes}, {"busy_s", c.busy_s}};
}

void from_json(const json& j, KindCounters& c) {
  c.ops = field<std::uint64_t>(j, "ops");
  c.failed = field<std::uint64_t>(j, "failed");
  c.bytes = field<std::uint64_t>(j, "bytes");
  c.busy_s = field<double>(j, "busy_s");
}

void to_json(json& j, const GroupSample& g) {
  j = {{"name", g.name},
       {"backend", g.backend},
       {"rank", g.rank},
       {"size", g.size},
       {"timeout_ms", g.timeout_ms},
       {"closed", g.closed},
       {"running", g.running ? json(*g.running) : json(nullptr)},
       {"idle_ms", g.idle_ms},
       {"last_id", g.last_id},
       {"kinds", g.kinds.empty() ? json::object() : json(g.kinds)},
       {"recent", g.recent.empty() ? json::array() : json(g.recent)}};
}

void from_json(const json& j, GroupSample& g) {
  g.name = field<std::string>(j, "name");
  g.backend = field<std::string>(j, "backend");
  g.rank = field<int>(j, "rank");
  g.size = field<int>(j, "size");
  g.timeout_ms = field<double>(j, "timeout_ms");
  g.closed = field<bool>(j, "closed");
  g.running.reset();
  if (const auto it = j.find("running"); it != j.end() && it->is_object()) g.running = it->get<RunningOp>();
  g.idle_ms = field<double>(j, "idle_ms");
  g.last_id = field<std::uint64_t>(j, "last_id");
  g.kinds.clear();
  if (const auto it = j.find("kinds"); it != j.end() && it->is_object()) {
    for (const auto& [kind, c] : it->items()) {
      if (c.is_object()) g.kinds[kind] = c.get<KindCounters>();
    }
  }
  g.recent = list<RecentOp>(j, "recent");
}

void to_json(json& j, const RankSample& r) {
  j = {{"rank", r.rank},
       {"local_rank", r.local_rank},
       {"host", r.host},
       {"pid", r.pid},
       {"process", process_name(r.process)},
       {"exit", r.exit},
       {"replacement", r.replacement},
       {"dumps", r.dumps},
       {"groups", r.groups.empty() ? json::array() : json(r.groups)}};
  if (r.changed_ago_ms) j["changed_ago_ms"] = *r.changed_ago_ms;
}

void from_json(const json& j, RankSample& r) {
  r.rank = field<int>(j, "rank", -1);
  r.local_rank = field<int>(j, "local_rank");
  r.host = field<std::string>(j, "host");
  r.pid = field<std::int64_t>(j, "pid");
  r.process = process_from_name(field<std::string>(j, "process"));
  r.exit = field<std::string>(j, "exit");
  r.changed_ago_ms.reset();
  if (const auto it = j.find("changed_ago_ms"); it != j.end() && it->is_number()) r.changed_ago_ms = it->get<double>();
  r.replacement = field<int>(j, "replacement");
  r.dumps = field<bool>(j, "dumps");
  r.groups = list<GroupSample>(j, "groups");
}

void to_json(json& j, const NodeSample& n) {
  j = {{"node", n.node}, {"host", n.host}, {"ranks", n.ranks.empty() ? json::array() : json(n.ranks)}};
}

void from_json(const json& j, NodeSample& n) {
  n.node = field<int>(j, "node");
  n.host = field<std::string>(j, "host");
  n.ranks = list<RankSample>(j, "ranks");
}

}  // namespace mci::jobview
