#include "launch/config/job_config.hpp"

#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/env.hpp"
#include "common/host_port.hpp"
#include "launch/config/devices.hpp"
#include "launch/config/scheduler.hpp"

namespace mci::launch {

namespace {

constexpr int kMaxProcesses = 1 << 20;

// named: how the message names the option ("--nnodes", "PET_NNODES").
int parse_count(const std::string& named, const std::string& value, int min, const std::string& what) {
  auto n = parse_int(value);
  if (!n || *n < min || *n > kMaxProcesses) {
    throw UsageError(fmt::format("{}='{}' is not valid: use {}", named, value, what));
  }
  return static_cast<int>(*n);
}

int parse_port(const std::string& named, const std::string& value) {
  auto n = parse_int(value);
  if (!n || *n < 1 || *n > 65535) {
    throw UsageError(
        fmt::format("{}='{}' is not a TCP port: use a number from 1 to 65535 (or "
                    "--standalone to let mcirun pick a free one)",
                    named, value));
  }
  return static_cast<int>(*n);
}

struct NodeRange {
  int min_nodes = 1;
  int max_nodes = 1;
  bool elastic() const { return min_nodes < max_nodes; }
};

// --nnodes=N, or torchrun's MIN:MAX (elastic when MIN < MAX).
NodeRange parse_nnodes(const std::string& named, const std::string& value) {
  const auto colon = value.find(':');
  if (colon == std::string::npos) {
    const int n = parse_count(named, value, 1, "a number of nodes, 1 or more");
    return {n, n};
  }
  const std::string what = "a number of nodes (1 or more) or a range MIN:MAX, e.g. 1:4";
  const int lo = parse_count(named, value.substr(0, colon), 1, what);
  const int hi = parse_count(named, value.substr(colon + 1), 1, what);
  if (lo > hi) {
    throw UsageError(fmt::format("{}='{}': the minimum number of nodes is above the maximum; write MIN:MAX, e.g. {}:{}",
                                 named, value, hi, lo));
  }
  return {lo, hi};
}

// Seconds, as a fraction or not; `what` says what they are.
std::chrono::milliseconds parse_seconds(const std::string& named, const std::string& value, const std::string& what) {
  char* end = nullptr;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(s) || s < 0 || s > 86400) {
    throw UsageError(
        fmt::format("{}='{}' is not valid: give {}, e.g. {}=3 or {}=0.5", named, value, what, named, named));
  }
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

constexpr const char* kGraceWhat = "the seconds between SIGTERM and SIGKILL";

// --grace, or torchrun's --shutdown-timeout, or its
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT; 3 s otherwise.
std::chrono::milliseconds resolve_grace(const CliArgs& a, const EnvLookup& env) {
  std::optional<std::chrono::milliseconds> grace, shutdown;
  if (a.grace) grace = parse_seconds(a.named("grace"), *a.grace, kGraceWhat);
  if (a.shutdown_timeout) shutdown = parse_seconds(a.named("shutdown_timeout"), *a.shutdown_timeout, kGraceWhat);
  if (grace && shutdown && *grace != *shutdown) {
    throw UsageError(fmt::format("{}={} and {}={} both say how long processes get to stop: give one of them",
                                 a.named("grace"), *a.grace, a.named("shutdown_timeout"), *a.shutdown_timeout));
  }
  if (grace) return *grace;
  if (shutdown) return *shutdown;
  if (const auto t = env("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); t && !t->empty()) {
    return parse_seconds("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", *t, kGraceWhat);
  }
  return std::chrono::milliseconds(3000);
}

// --bind, or torchrun's --numa-binding: node and socket are the CPUs of the
// GPU's NUMA node, exclusive and core-complex cores of the rank's own.
topo::BindMode resolve_bind(const CliArgs& a, std::vector<std::string>& notices) {
  std::optional<topo::BindMode> bind;
  if (a.bind) {
    bind = topo::parse_bind_mode(*a.bind);
    if (!bind) {
      throw UsageError(
          fmt::format("--bind={}: use none, numa (the CPUs of each process's GPU's NUMA node) or core "
                      "(cores of its own)",
                      *a.bind));
    }
  }
  if (!a.numa_binding) return bind.value_or(topo::BindMode::none);
  const std::string& n = *a.numa_binding;
  topo::BindMode mapped = topo::BindMode::none;
  if (n == "node" || n == "socket") {
    mapped = topo::BindMode::numa;
  } else if (n == "exclusive" || n == "core-complex") {
    mapped = topo::BindMode::core;
  } else {
    throw UsageError(
        fmt::format("--numa-binding={}: use node, socket, exclusive or core-complex (torchrun's modes)", n));
  }
  if (bind && *bind != mapped) {
    throw UsageError(
        fmt::format("--bind={} and --numa-binding={} pin the processes differently: give one of them", *a.bind, n));
  }
  if (n == "socket") {
    notices.push_back(
        "mcirun: --numa-binding=socket pins each process to its GPU's NUMA node (--bind numa), not to every NUMA "
        "node of its socket: the same where a socket has one NUMA node");
  } else if (n == "core-complex") {
    notices.push_back(
        "mcirun: --numa-binding=core-complex gives each process cores of its own on its GPU's NUMA node (--bind "
        "core), not one L3 core complex");
  }
  return mapped;
}

bool parse_bool_word(const std::string& v, bool& out) {
  for (const char* t : {"1", "true", "True", "TRUE", "yes", "y"}) {
    if (v == t) return out = true;
  }
  for (const char* f : {"0", "false", "False", "FALSE", "no", "n"}) {
    if (v == f) return !(out = false);
  }
  return false;
}

// --rdzv_conf KEY=VALUE,...: torchrun's rendezvous settings. The join
// timeout (c10d's join_timeout, static's timeout) bounds how long a node
// waits for node 0; last_call_timeout, keep_alive_interval,
// keep_alive_max_attempt and is_host are c10d's, for an elastic --nnodes
// MIN:MAX; the others have no counterpart here.
void apply_rdzv_conf(const CliArgs& a, bool elastic, JobConfig& c, ElasticNodes& e) {
  const std::string named = a.named("rdzv_conf");
  const std::string& text = *a.rdzv_conf;
  if (text.empty()) return;
  std::vector<std::string> ignored;
  for (const std::string& item : split_list(text)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UsageError(
          fmt::format("{}='{}': write KEY=VALUE pairs separated by commas, e.g. join_timeout=900", named, text));
    }
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    auto whole = [&](long long lo, const char* what = "whole seconds") {
      const auto s = parse_int(value);
      if (!s || *s < lo || *s > 7 * 24 * 3600) {
        throw UsageError(fmt::format("{}: {}={} is not valid: give {}, {} or more", named, key, value, what, lo));
      }
      return *s;
    };
    const bool elastic_key = key == "last_call_timeout" || key == "keep_alive_interval" ||
                             key == "keep_alive_max_attempt" || key == "is_host";
    if (elastic_key && !elastic) {
      ignored.push_back(key);
    } else if (c.etcd && (key == "protocol" || key == "read_timeout" || key == "cacert" || key == "cert" ||
                          key == "key" || key == "etcd_prefix")) {
      // etcd's, read by resolve_etcd
    } else if (key == "join_timeout" || key == "timeout") {
      c.join_timeout = std::chrono::seconds(whole(1));
    } else if (key == "last_call_timeout") {
      e.last_call = std::chrono::seconds(whole(0));
    } else if (key == "keep_alive_interval") {
      e.keep_alive = std::chrono::seconds(whole(1));
    } else if (key == "keep_alive_max_attempt") {
      e.keep_alive_max_attempt = static_cast<int>(whole(1, "a whole number"));
    } else if (key == "is_host") {
      bool b = false;
      if (!parse_bool_word(value, b)) {
        throw UsageError(fmt::format("{}: is_host={} is not valid: give true or false", named, value));
      }
      e.is_host = b;
    } else {
      ignored.push_back(key);
    }
  }
  if (!ignored.empty()) {
    std::string keys;
    for (const auto& k : ignored) keys += (keys.empty() ? "" : ", ") + k;
    c.notices.push_back(
        fmt::format("mcirun: {}: {} ignored (torchrun's rendezvous settings; mcirun's store uses only "
                    "join_timeout (or timeout), and, for --nnodes MIN:MAX, last_call_timeout, "
                    "keep_alive_interval, keep_alive_max_attempt and is_host)",
                    named, keys));
  }
}

// --signals-to-handle: the signals that stop the job. SIGINT, SIGTERM and
// SIGHUP always do (mcirun's contract: a stop never leaves processes behind).
void apply_stop_signals(const CliArgs& a, JobConfig& c) {
  const std::string text = a.signals_to_handle.value_or(kDefaultStopSignals);
  const std::string named = a.named("signals_to_handle");
  std::vector<int> sigs;
  for (std::string name : split_list(text)) {
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    const auto sig = signal_by_name(name);
    if (!sig) {
      throw UsageError(
          fmt::format("{}='{}': '{}' is not a signal name; write them as torchrun does, e.g. "
                      "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
                      named, text, name));
    }
    if (*sig == SIGKILL || *sig == SIGSTOP || *sig == SIGCHLD || *sig == SIGTSTP || *sig == SIGCONT) {
      throw UsageError(fmt::format(
          "{}: {} cannot be one: SIGKILL and SIGSTOP cannot be caught, SIGCHLD is how mcirun sees exits, and "
          "SIGTSTP and SIGCONT already pause and resume every process",
          named, name));
    }
    sigs.push_back(*sig);
  }
  std::vector<std::string> kept;
  for (int always : {SIGINT, SIGTERM, SIGHUP}) {
    if (std::find(sigs.begin(), sigs.end(), always) == sigs.end()) {
      sigs.push_back(always);
      kept.push_back(signal_name(always));
    }
  }
  if (a.signals_to_handle && !kept.empty()) {
    std::string names;
    for (const auto& k : kept) names += (names.empty() ? "" : ", ") + k;
    c.notices.push_back(
        fmt::format("mcirun: {} leaves out {}: mcirun still stops the job on them, passing them on (it never leaves "
                    "processes behind)",
                    named, names));
  }
  c.stop_signals = std::move(sigs);
  c.stop_signals_text = text;
}

void apply_logs(const CliArgs& a, const EnvLookup& env, JobConfig& c) {
  LogOptions& o = c.logs;
  if (a.log_dir && !a.log_dir->empty()) o.log_dir = *a.log_dir;
  if (a.redirects) o.redirects = parse_std_streams(a.named("redirects"), *a.redirects);
  if (a.tee) o.tee = parse_std_streams(a.named("tee"), *a.tee);
  if (a.local_ranks_filter) o.console_ranks = parse_local_ranks(a.named("local_ranks_filter"), *a.local_ranks_filter);
  if (a.log_line_prefix_template && !a.log_line_prefix_template->empty()) {
    o.prefix_template = *a.log_line_prefix_template;
  } else if (const auto t = env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); t && !t->empty()) {
    o.prefix_template = *t;
  }
  if (a.duplicate_stdout_filters) o.stdout_filters = parse_filters(*a.duplicate_stdout_filters);
  if (a.duplicate_stderr_filters) o.stderr_filters = parse_filters(*a.duplicate_stderr_filters);
  if ((!o.stdout_filters.empty() || !o.stderr_filters.empty()) && !o.tee.any()) {
    c.notices.push_back(
        "mcirun: --duplicate-stdout-filters and --duplicate-stderr-filters copy lines of tee'd streams, and none "
        "is tee'd: add -t 3 (or -t 1, -t 2) to copy them");
  }
}

// torchrun's flags that have no counterpart here: checked, and said so.
void note_torchrun_leftovers(const CliArgs& a, JobConfig& c) {
  if (a.monitor_interval) {
    parse_seconds(a.named("monitor_interval"), *a.monitor_interval, "seconds");  // checked, then unused
  }
  if (a.start_method) {
    const std::string& m = *a.start_method;
    if (m != "spawn" && m != "fork" && m != "forkserver") {
      throw UsageError(fmt::format("{}={}: use spawn, fork or forkserver", a.named("start_method"), m));
    }
    if (m != "spawn") {
      c.notices.push_back(fmt::format(
          "mcirun: {}={} has no meaning here: mcirun starts every process as a fresh program (fork and exec, "
          "as spawn does)",
          a.named("start_method"), m));
    }
  }
  if (a.event_log_handler && *a.event_log_handler != "null") {
    c.notices.push_back(
        fmt::format("mcirun: {}={} ignored: mcirun records no torchelastic events; its summary on stderr says what "
                    "happened",
                    a.named("event_log_handler"), *a.event_log_handler));
  }
  if (a.logs_specs) {
    c.notices.push_back(fmt::format(
        "mcirun: --logs-specs={} ignored: mcirun writes logs as torchrun's default (DefaultLogsSpecs), the only "
        "one it supports, and loads no torchrun.logs_specs plugin",
        *a.logs_specs));
  }
}

// --on-rank-loss, once --max-restarts and --nnodes are known: continue is
// another answer to a loss than a restart, and an elastic job's lost node
// fails its attempt (launch/nodes/heartbeat.hpp), which continue and replace would
// contradict. Under replace, --max-restarts caps the replacements of each
// node instead: a replacement is this policy's restart, of one process.
// --monitor[=[HOST:]PORT], else MCI_MONITOR (the same values; unset,
// empty, 0 or "off": no page): node 0's page.
void apply_monitor(const CliArgs& a, const EnvLookup& env, JobConfig& c) {
  std::optional<std::string> v = a.monitor;
  std::string named = "--monitor";
  if (!v) {
    v = env("MCI_MONITOR");
    named = "MCI_MONITOR";
    if (!v || v->empty() || *v == "off" || *v == "0") return;
  }
  JobConfig::Monitor m;
  if (*v != "auto" && *v != "0" && !v->empty()) {
    if (v->find_first_not_of("0123456789") == std::string::npos) {
      m.port = parse_port(named, *v);
    } else {
      const auto colon = v->rfind(':');
      std::string host = colon == std::string::npos ? *v : v->substr(0, colon);
      const std::string port = colon == std::string::npos ? "0" : v->substr(colon + 1);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
      if (host.empty() || (host.find(':') != std::string::npos && v->front() != '[')) {
        throw UsageError(
            fmt::format("{}={}: give [HOST:]PORT, e.g. 127.0.0.1:8265 (an IPv6 address in brackets)", named, *v));
      }
      m.host = host;
      m.port = port == "0" || port.empty() ? 0 : parse_port(named, port);
    }
  }
  if (c.elastic && c.etcd) {
    throw UsageError(
        fmt::format("{} with an elastic --nnodes={}:{} on etcd is not built yet (the page's server follows node "
                    "ranks, which an elastic job gives again at each attempt): drop {}, or give a fixed --nnodes=N",
                    named, c.elastic->min_nodes, c.elastic->max_nodes, named));
  }
  const auto open = env("MCI_MONITOR_OPEN");
  m.open = open && !open->empty() && *open != "0";
  c.monitor = m;
}

void apply_on_rank_loss(const std::string& value, bool max_restarts_given, JobConfig& c) {
  c.on_rank_loss = parse_on_rank_loss("--on-rank-loss", value);
  if (c.on_rank_loss == OnRankLoss::stop) return;
  if (c.elastic) {
    throw UsageError(
        fmt::format("--on-rank-loss={} with an elastic --nnodes={}:{} is not built yet (a lost node ends the "
                    "attempt there): give a fixed --nnodes N, or drop --on-rank-loss",
                    value, c.elastic->min_nodes, c.elastic->max_nodes));
  }
  if (c.on_rank_loss == OnRankLoss::replace) {
    if (max_restarts_given) {
      c.max_replacements = c.max_restarts;
      c.max_replacements_given = true;
    }
    c.max_restarts = 0;
    return;
  }
  if (c.max_restarts > 0) {
    throw UsageError(fmt::format(
        "--on-rank-loss=continue and --max-restarts={} are two answers to a lost rank (go on without it, or "
        "start every process again): give one of them",
        c.max_restarts));
  }
}

// A fresh run id, as torchrun gives --standalone jobs (uuid4's form).
std::string fresh_run_id() {
  const auto n = auth::random_nonce();
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    std::uint8_t b = n[static_cast<std::size_t>(i)];
    if (i == 6) b = static_cast<std::uint8_t>((b & 0x0f) | 0x40);
    if (i == 8) b = static_cast<std::uint8_t>((b & 0x3f) | 0x80);
    hex += fmt::format("{:02x}", b);
    if (i == 3 || i == 5 || i == 7 || i == 9) hex += '-';
  }
  return hex;
}

// -m, --run-path and --no-python, as torchrun combines them.
RunAs run_as(const CliArgs& a, std::vector<std::string>& notices) {
  if (a.run_path) {
    if (a.module) notices.push_back("mcirun: --run-path wins over -m, as under torchrun: PROGRAM runs as a script");
    return RunAs::python_script;
  }
  if (a.module && a.no_python) {
    throw UsageError(
        "-m runs PROGRAM as a Python module and --no-python runs it without Python: give one of them "
        "(torchrun refuses both too)");
  }
  if (a.module) return RunAs::python_module;
  return a.no_python ? RunAs::executable : RunAs::by_name;
}

// --virtual-local-rank: each process sees one GPU, its own, as device 0.
void check_virtual_local_rank(const JobConfig& c, const EnvLookup& env) {
  for (const char* var : {"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    const auto v = env(var);
    if (!v || (std::string(var) == "HIP_VISIBLE_DEVICES" && v->empty())) continue;
    const int entries = v->empty() ? 0 : static_cast<int>(std::count(v->begin(), v->end(), ',')) + 1;
    if (c.nproc_per_node > entries) {
      throw ConfigError(fmt::format(
          "--virtual-local-rank gives each process one GPU of {}='{}', which names {}, but this node runs {} "
          "processes: use --nproc_per_node={} or name more GPUs",
          var, *v, entries, c.nproc_per_node, entries));
    }
    return;
  }
}

// --nnodes MIN:MAX: which node hosts the store (torchrun's c10d ignores
// --node_rank; here 0 says "this one hosts it", any other "this one does
// not"), and node 0's address under a scheduler.
// Node 0's host under a scheduler: the one it names, else MASTER_ADDR; what
// says what the scheduler started, for the error when neither says.
template <class Placement>
std::string node0_host(const Placement& p, const EnvLookup& env, const std::string& what) {
  if (p.master_addr) return *p.master_addr;
  if (auto m = env("MASTER_ADDR"); m && !m->empty()) return *m;
  throw ConfigError(
      fmt::format("{} started {} but does not say which host is node 0: pass "
                  "--master_addr=<host of node 0> (or export MASTER_ADDR)",
                  p.source, what));
}

void resolve_elastic(const CliArgs& a, const EnvLookup& env, JobConfig& c, bool store_given) {
  ElasticNodes& e = *c.elastic;
  if (c.etcd) {
    // On etcd no node hosts the store: every node is alike, and each
    // attempt's list says which is GROUP_RANK 0.
    if (const auto p = scheduler_placement(env)) c.placement_source = p->source;
    if (a.node_rank || e.is_host) {
      c.notices.push_back(
          fmt::format("mcirun: --nnodes={} on etcd: {} ignored: no node hosts the store, and each attempt numbers "
                      "its nodes (the nodes already in the job first, then newcomers)",
                      *a.nnodes, a.node_rank ? a.named("node_rank") + "=" + *a.node_rank : "is_host"));
    }
    e.is_host = false;
    c.node_rank = 0;  // until the first attempt says
    return;
  }
  std::optional<int> rank;
  if (a.node_rank) rank = c.node_rank;
  const auto p = scheduler_placement(env);
  if (p) {
    c.placement_source = p->source;
    if (!rank) rank = p->node_rank;
    if (!store_given) {
      c.master_addr = node0_host(*p, env, "this node of an elastic job");
    }
  }
  if (rank && e.is_host && *e.is_host != (*rank == 0)) {
    throw UsageError(fmt::format(
        "--node_rank={} and --rdzv_conf is_host={} disagree on whether this node hosts the store: give one of "
        "them",
        *rank, *e.is_host ? "true" : "false"));
  }
  if (rank && !e.is_host) e.is_host = *rank == 0;
  if (a.node_rank && *rank != 0) {
    c.notices.push_back(
        fmt::format("mcirun: --nnodes={}: {}={} only says that this node does not host the store; its GROUP_RANK and "
                    "ranks are given at each attempt (node 0 first, then the nodes already in the job, then newcomers; "
                    "torchrun's c10d ignores --node_rank)",
                    *a.nnodes, a.named("node_rank"), *a.node_rank));
  }
  if (a.rdzv_backend && *a.rdzv_backend == "static") {
    c.notices.push_back(fmt::format(
        "mcirun: --nnodes={} with {}=static: mcirun runs the range elastically, as torchrun's c10d rendezvous "
        "does (torchrun's static one would wait for {} nodes)",
        *a.nnodes, a.named("rdzv_backend"), e.max_nodes));
  }
  c.node_rank = 0;  // until the first attempt says
}

struct StoreFlags {
  std::optional<std::string> addr, port, endpoint;
};

// Where the store is, as the flags say: under --standalone, torchrun
// ignores it; mcirun refuses it on the command line (it contradicts
// --standalone) and ignores it, saying so, when it comes from PET_ variables.
StoreFlags store_flags(const CliArgs& a, JobConfig& c) {
  StoreFlags f{a.master_addr, a.master_port, a.rdzv_endpoint};
  if (a.standalone) {
    for (auto [name, value] : {std::pair{"master_addr", &f.addr}, std::pair{"master_port", &f.port},
                               std::pair{"rdzv_endpoint", &f.endpoint}}) {
      if (!*value || !a.from_env.count(name)) continue;
      c.notices.push_back(
          fmt::format("mcirun: {} ignored: --standalone picks the store's address itself", a.from_env.at(name)));
      value->reset();
    }
  }
  // On etcd, --rdzv_endpoint names its members, and --master_addr/--master_port
  // the program's MASTER_ADDR/MASTER_PORT.
  if (f.endpoint && (f.addr || f.port) && !c.etcd) {
    throw UsageError(
        "--rdzv_endpoint and --master_addr/--master_port both say where the store "
        "is: give one or the other");
  }
  return f;
}

// --standalone: one node, the store on a free port of 127.0.0.1.
void resolve_standalone(const CliArgs& a, const StoreFlags& f, JobConfig& c) {
  if (f.addr || f.port || f.endpoint) {
    throw UsageError(
        "--standalone picks a free port on 127.0.0.1 itself: drop --master_addr, "
        "--master_port and --rdzv_endpoint, or drop --standalone");
  }
  if (a.nnodes && parse_nnodes(a.named("nnodes"), *a.nnodes).max_nodes != 1) {
    throw UsageError(
        fmt::format("--standalone runs one node, but {}={}: drop --standalone "
                    "and give --master_addr/--master_port (the same on every node)",
                    a.named("nnodes"), *a.nnodes));
  }
  if (a.node_rank && parse_count(a.named("node_rank"), *a.node_rank, 0, "0 with --standalone") != 0) {
    throw UsageError("--standalone runs one node, whose --node_rank is 0");
  }
  c.master_port = 0;
}

// Where this node is in the job: the flags, else a scheduler's variables
// (srun, mpirun); an elastic range meets again at each attempt.
void resolve_nodes(const CliArgs& a, const EnvLookup& env, const StoreFlags& f, ElasticNodes elastic, JobConfig& c) {
  NodeRange range;
  if (a.nnodes) {
    range = parse_nnodes(a.named("nnodes"), *a.nnodes);
    c.nnodes = range.max_nodes;
  }
  if (a.node_rank) c.node_rank = parse_count(a.named("node_rank"), *a.node_rank, 0, "a node index, 0 or more");
  if (range.elastic()) {
    elastic.min_nodes = range.min_nodes;
    elastic.max_nodes = range.max_nodes;
    c.elastic = elastic;
  }
  if (f.endpoint) {
    std::tie(c.master_addr, c.master_port) = parse_endpoint(*f.endpoint, kDefaultRdzvPort);
  }
  if (f.addr) {
    if (f.addr->empty()) {
      throw UsageError(fmt::format("{} is empty: give the address of node 0", a.named("master_addr")));
    }
    c.master_addr = *f.addr;
  }
  if (f.port) c.master_port = parse_port(a.named("master_port"), *f.port);

  // A scheduler fills in what the flags leave out.
  const bool placed_by_flags = a.nnodes && a.node_rank;
  if (c.elastic) {
    resolve_elastic(a, env, c, f.addr || f.endpoint);
  } else if (!placed_by_flags) {
    if (auto p = scheduler_placement(env)) {
      c.placement_source = p->source;
      if (!a.nnodes) c.nnodes = p->nnodes;
      if (!a.node_rank) c.node_rank = p->node_rank;
      if (c.nnodes > 1 && !f.addr && !f.endpoint && !c.etcd) {
        c.master_addr = node0_host(*p, env, fmt::format("{} nodes", c.nnodes));
      }
    } else if (c.nnodes > 1 && !a.node_rank) {
      throw UsageError(
          fmt::format("--nnodes={} needs --node_rank on every node: 0 on the node at --master_addr (it hosts "
                      "the store), 1 to {} on the others",
                      c.nnodes, c.nnodes - 1));
    }
  }
  if (!c.elastic && c.node_rank >= c.nnodes) {
    throw UsageError(fmt::format("--node_rank={} is not below --nnodes={}: number the nodes 0 to {}", c.node_rank,
                                 c.nnodes, c.nnodes - 1));
  }
}

}  // namespace

int resolve_nproc(const std::string& spec, const EnvLookup& env, const std::string& dev_dir, const std::string& named) {
  if (spec == "cpu") return usable_cpus();
  if (spec == "gpu" || spec == "auto") {
    const int gpus = visible_gpus(env, dev_dir);
    if (gpus > 0) return gpus;
    if (spec == "auto") return usable_cpus();
    const auto cvd = env("CUDA_VISIBLE_DEVICES");
    throw ConfigError(fmt::format("{}=gpu: no GPU is visible ({}); give a number of processes, or cpu", named,
                                  cvd ? fmt::format("CUDA_VISIBLE_DEVICES='{}'", *cvd)
                                      : fmt::format("no {}/nvidiaN device", dev_dir)));
  }
  return parse_count(named, spec, 1, "a number of processes (1 or more), or cpu, gpu or auto");
}

std::pair<std::string, int> parse_endpoint(const std::string& endpoint, int default_port) {
  std::string why;
  const auto hp = split_host_port(endpoint, why);
  if (!hp) throw UsageError(fmt::format("--rdzv_endpoint='{}': {}", endpoint, why));
  return {hp->host, hp->port == 0 ? default_port : hp->port};
}

namespace {

// --rdzv_backend=etcd: the members (--rdzv_endpoint, comma-separated, port
// 2379 when left out) and what of torchrun's --rdzv_conf applies to them.
JobConfig::Etcd resolve_etcd(const CliArgs& a, const EnvLookup& env) {
  const std::string backend = a.named("rdzv_backend") + "=" + *a.rdzv_backend;
  if (a.standalone) {
    throw UsageError(fmt::format("{} with --standalone: a one-node job needs no etcd; drop one of them", backend));
  }
  if (!a.rdzv_endpoint || a.rdzv_endpoint->empty()) {
    throw UsageError(
        fmt::format("{} needs {}=HOST1:2379,HOST2:2379,HOST3:2379: the client endpoints of the etcd cluster", backend,
                    a.named("rdzv_endpoint")));
  }
  JobConfig::Etcd e;
  bool plain = false;  // an http:// endpoint, or protocol=http
  const auto mixed = [&] {
    return UsageError(
        fmt::format("{}: the etcd endpoints mix http and https: a cluster speaks one protocol; give "
                    "them all alike (and --rdzv_conf protocol= to match)",
                    a.named("rdzv_endpoint")));
  };
  for (const std::string& item : split_list(*a.rdzv_endpoint)) {
    std::string hostport = item;
    if (hostport.starts_with("http://")) {
      hostport = hostport.substr(7);
      plain = true;
    }
    if (hostport.starts_with("https://")) {
      hostport = hostport.substr(8);
      e.https = true;
    }
    if (plain && e.https) throw mixed();
    const auto [host, port] = parse_endpoint(hostport, 2379);
    e.endpoints.push_back(HostPort{host, port}.text());
  }
  if (a.rdzv_conf) {
    for (const std::string& item : split_list(*a.rdzv_conf)) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) continue;  // apply_rdzv_conf says what is wrong
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      if (key == "protocol") {
        if (value != "http" && value != "https") {
          throw UsageError(
              fmt::format("{}: protocol={} is not valid: give http or https", a.named("rdzv_conf"), value));
        }
        e.https = e.https || value == "https";
        plain = plain || value == "http";
        if (plain && e.https) throw mixed();
      }
      if (key == "cacert") e.cacert = value;
      if (key == "cert") e.cert = value;
      if (key == "key") e.key = value;
      if (key == "etcd_prefix") {
        if (value.empty() || value.front() != '/' || value.back() == '/') {
          throw UsageError(
              fmt::format("{}: etcd_prefix={} is not valid: give a path such as /mci/jobs (a leading "
                          "'/', none at the end)",
                          a.named("rdzv_conf"), value));
        }
        e.prefix = value;
      }
      if (key == "read_timeout") {
        const auto s = parse_int(value);
        if (!s || *s < 1 || *s > 3600) {
          throw UsageError(fmt::format("{}: read_timeout={} is not valid: give whole seconds, 1 or more",
                                       a.named("rdzv_conf"), value));
        }
        e.read_timeout = std::chrono::seconds(*s);
      }
    }
  }
  if (const auto ttl = env("MCI_ETCD_LEASE_TTL")) {
    const auto s = parse_int(*ttl);
    if (!s || *s < 1 || *s > 600) {
      throw ConfigError(fmt::format("MCI_ETCD_LEASE_TTL={} is not valid: give whole seconds, 1 to 600", *ttl));
    }
    e.lease_ttl = std::chrono::seconds(*s);
  }
  return e;
}

}  // namespace

JobConfig resolve_job(const CliArgs& a, const EnvLookup& env, const std::string& dev_dir) {
  JobConfig c;
  if (a.rdzv_id && !a.rdzv_id->empty()) {
    c.run_id = *a.rdzv_id;
  } else if (a.standalone) {
    c.run_id = fresh_run_id();
  }
  if (a.max_restarts) {
    c.max_restarts = parse_count(a.named("max_restarts"), *a.max_restarts, 0, "a number of restarts, 0 or more");
  }
  const bool on_etcd = a.rdzv_backend && (*a.rdzv_backend == "etcd" || *a.rdzv_backend == "etcd-v2");
  if (a.rdzv_backend && !on_etcd && *a.rdzv_backend != "static" && *a.rdzv_backend != "c10d") {
    throw UsageError(
        fmt::format("{}={}: use static or c10d (mcirun's own store, on node 0), or etcd (etcd-v2): the job's store "
                    "on an etcd cluster, which survives the loss of any node",
                    a.named("rdzv_backend"), *a.rdzv_backend));
  }
  if (on_etcd) c.etcd = resolve_etcd(a, env);
  note_torchrun_leftovers(a, c);
  ElasticNodes elastic;
  if (a.rdzv_conf) {
    const bool elastic_range = a.nnodes && !a.standalone && parse_nnodes(a.named("nnodes"), *a.nnodes).elastic();
    apply_rdzv_conf(a, elastic_range, c, elastic);
  }
  apply_stop_signals(a, c);
  apply_logs(a, env, c);
  if (a.role) c.role = *a.role;
  if (a.local_addr) {
    if (a.local_addr->empty())
      throw UsageError(fmt::format("{} is empty: give an address of this host", a.named("local_addr")));
    c.local_addr = *a.local_addr;
  }
  c.virtual_local_rank = a.virtual_local_rank;

  StoreFlags f = store_flags(a, c);
  if (c.etcd) f.endpoint.reset();  // etcd's members, not a store of mcirun's
  c.grace = resolve_grace(a, env);
  c.bind = resolve_bind(a, c.notices);
  c.prefix = a.prefix;
  c.standalone = a.standalone;
  c.nproc_per_node = resolve_nproc(a.nproc_per_node, env, dev_dir, a.named("nproc_per_node"));

  if (a.standalone) {
    resolve_standalone(a, f, c);
  } else {
    resolve_nodes(a, env, f, elastic, c);
  }
  // On etcd no node hosts the store: without --master_addr, node 0 gives
  // the program its own address (JobRun::agree_program_port).
  if (c.etcd && !f.addr) c.master_addr.clear();
  if (static_cast<long long>(c.nnodes) * c.nproc_per_node > kMaxProcesses) {
    throw UsageError(fmt::format("{} nodes x {} processes is more than mcirun supports ({})", c.nnodes,
                                 c.nproc_per_node, kMaxProcesses));
  }
  if (c.virtual_local_rank) check_virtual_local_rank(c, env);
  if (a.on_rank_loss) apply_on_rank_loss(*a.on_rank_loss, a.max_restarts.has_value(), c);
  apply_monitor(a, env, c);
  c.program = resolve_program(a.command, run_as(a, c.notices), env);
  return c;
}

}  // namespace mci::launch
