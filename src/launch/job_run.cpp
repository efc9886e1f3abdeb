#include "launch/job_run.hpp"

#include <fmt/format.h>

#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/net_interfaces.hpp"
#include "common/settings.hpp"
#include "common/socket.hpp"
#include "jobview/job_monitor.hpp"
#include "launch/config/python_path.hpp"
#include "launch/nodes/elastic_rendezvous.hpp"
#include "launch/nodes/heartbeat.hpp"
#include "launch/nodes/node_adopter.hpp"
#include "launch/nodes/node_link.hpp"
#include "launch/nodes/node_sizes.hpp"
#include "launch/output/error_files.hpp"
#include "launch/output/stream_relay.hpp"
#include "launch/ranks/child_env.hpp"
#include "launch/ranks/fd_budget.hpp"
#include "launch/ranks/guardian.hpp"
#include "launch/ranks/placement.hpp"
#include "launch/ranks/supervisor.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#ifdef MCI_HAVE_ETCD
#include "store/store_relay.hpp"
#endif

namespace mci::launch {

namespace {

// How this node reaches node 0's store, for attempt a.
NodeLinkOptions link_options(const Attempt& a) {
  NodeLinkOptions o;
  o.store = a.store;
  o.nnodes = a.nnodes;
  o.node_rank = a.node_rank;
  o.attempt = a.index;
  return o;
}

// A node given another --on-rank-loss than node 0 would stop where the
// others go on, or the reverse: it starts nothing, and tells the other
// nodes through the store (as a failure, so they stop their ranks rather
// than wait for this node's).
int refuse_other_on_rank_loss(const JobConfig& job, const Attempt& a, const std::string& node0s) {
  const std::string why = fmt::format(
      "--on-rank-loss={} on node {} (host {}), but node 0 runs with --on-rank-loss={}: give every node the "
      "same --on-rank-loss",
      on_rank_loss_name(job.on_rank_loss), a.node_rank, host_name(), node0s);
  say(fmt::format("mcirun: {}; this node starts nothing", why));
  NodeLink(link_options(a)).report_failure(why);  // published before the link goes (its destructor waits for that)
  return 1;
}

// mcirun's message when node 0 cannot bind the store's address.
std::string cannot_host(const JobConfig& job, const std::string& what) {
  if (what.find("already in use") != std::string::npos) {
    // The library's wording suggests MASTER_PORT, which is right for a
    // program that hosts its own store but not here: mcirun reads only its
    // command line (torchrun does the same).
    return fmt::format(
        "mcirun: cannot host the job's store: port {} on {} is already in use: give a free port with "
        "--master_port=N (mcirun ignores MASTER_PORT, as torchrun does), or run a one-node job with --standalone "
        "(mcirun picks a free port), or stop the process that holds it",
        job.master_port, job.master_addr);
  }
  return fmt::format(
      "mcirun: cannot host the job's store: {} (node 0 hosts it: --master_addr={} must be an address of this host)",
      what, job.master_addr);
}

}  // namespace

JobRun::Outcome JobRun::ended(int rc) {
  Outcome o;
  o.ended = rc;
  return o;
}

JobRun::JobRun(const JobConfig& job, const EnvLookup& env, SignalFd& signals, Guardian* guardian)
    : job_(job), env_(env), signals_(signals), guardian_(guardian) {}

JobRun::~JobRun() = default;

int JobRun::run() {
  if (auto rc = check_limits()) return *rc;
  if (auto rc = reach_store()) return *rc;
  say_where();
  if (auto rc = agree_program_port()) return *rc;
  if (auto rc = agree_node_sizes()) return *rc;
  if (auto rc = prepare_node()) return *rc;
  const int rc = run_attempts();
#ifdef MCI_HAVE_ETCD
  // Every node has finished (node 0 waited for them): the job's keys go now,
  // not when their lease runs out. A failed job's stay until then, for a
  // node still reading the news.
  if (relay_ && base_.store.hosted_here && rc == 0) relay_->end_job();
#endif
  return rc;
}

std::optional<int> JobRun::check_limits() {
  const auto connect = env_("MCI_CONNECT");
  const FdCheck fds = ensure_fds(fd_need(job_.nproc_per_node, job_.world_size(), job_.hosts_store(),
                                         connect && ChoiceValue("MCI_CONNECT", "eager").named_by(*connect)));
  if (!fds.ok) {
    say(fds.message);
    return 1;
  }
  if (!fds.message.empty()) say(fds.message);
  return std::nullopt;
}

std::optional<int> JobRun::reach_store() {
  JobStore s;
  s.host = job_.master_addr;
  s.port = job_.master_port;
  s.token = choose_token(env_, job_.nnodes);
  s.hosted_here = job_.hosts_store();
  toward_ = job_.master_addr;
  if (job_.etcd) return reach_etcd(s);
  if (job_.elastic && !job_.elastic->is_host) {
    // Neither --node_rank nor is_host says which node hosts the store: the
    // first mcirun that can bind --master_addr:--master_port does
    // (torchrun c10d's rule); the others reach it there.
    try {
      store_ = std::make_unique<StoreServer>(StoreServerOptions{s.host, s.port, s.token});
      s.hosted_here = true;
    } catch (const Error& e) {
      log::info("mcirun: another node hosts the job's store ({}:{} cannot be bound here: {})", s.host, s.port,
                e.what());
    }
  }
  if (s.hosted_here && !store_) {
    try {
      // Several nodes: on every address of this host, as torchrun's store
      // listens (node 0's name may resolve to 127.0.1.1 here and to its
      // real address on the other nodes, who then could not reach a store
      // bound to the former); --master_addr must still be an address of
      // this host, which binding it first checks.
      const bool every_address = job_.nnodes > 1 && !job_.elastic;
      if (every_address) (void)listen_tcp(s.host, 0, 1);
      store_ =
          std::make_unique<StoreServer>(StoreServerOptions{every_address ? std::string() : s.host, s.port, s.token});
    } catch (const Error& e) {
      say(cannot_host(job_, e.what()));
      return 1;
    }
  }
  if (store_) s.port = store_->port();
  base_ = first_attempt(job_, std::move(s));
  return std::nullopt;
}

// On etcd, every node serves its processes a relay to the store, on the
// address it reaches etcd's first member from (so that a rank's store
// connection names the interface its peers reach it on, as node 0's store
// does otherwise). Node 0 still leads (the program's port, the nodes'
// sizes, the exit barrier) but holds nothing the others need.
std::optional<int> JobRun::reach_etcd(JobStore& s) {
#ifdef MCI_HAVE_ETCD
  const JobConfig::Etcd& e = *job_.etcd;
  std::string why;
  toward_ = split_host_port(e.endpoints.front(), why).value_or(HostPort{}).host;  // checked by JobConfig
  const auto route = route_toward(toward_);
  StoreRelayOptions o;
  o.host = route ? route->address : "127.0.0.1";
  o.token = s.token;
  o.etcd.endpoints = e.endpoints;
  o.etcd.job_id = job_.run_id;
  o.etcd.request_timeout = e.read_timeout;
  o.etcd.https = e.https;
  o.etcd.cacert = e.cacert;
  o.etcd.cert = e.cert;
  o.etcd.key = e.key;
  o.etcd.prefix = e.prefix;
  o.lease_ttl = e.lease_ttl;
  try {
    relay_ = std::make_unique<StoreRelay>(o);
  } catch (const Error& err) {
    say(fmt::format("mcirun: cannot reach the job's store on etcd (--rdzv_id={}): {}", job_.run_id, err.what()));
    return 1;
  }
  s.host = o.host;
  s.port = relay_->port();
  s.trouble = [relay = relay_.get()] { return relay->trouble(); };
  // An elastic range has no node 0 for good: each attempt's GROUP_RANK 0
  // leads that attempt (meet_elastic).
  s.hosted_here = !job_.elastic && job_.node_rank == 0;
  s.replicated = true;
  base_ = first_attempt(job_, std::move(s));
  return std::nullopt;
#else
  (void)s;
  say("mcirun: --rdzv_backend=etcd: this mcirun was built without the store on etcd (cpp-httplib was not found "
      "when it was built): install libcpp-httplib-dev and build again");
  return 1;
#endif
}

void JobRun::say_where() const {
  const JobStore& s = base_.store;
  const std::string placed = job_.placement_source.empty() ? "" : " (placed by " + job_.placement_source + ")";
  if (job_.elastic && s.replicated) {
    say(
        fmt::format("mcirun: elastic job of {} to {} nodes, {} process(es) on this node, the job's store on etcd ({}, "
                    "job '{}') through this node's relay {}:{}{}; no node holds it, and any node may be lost",
                    job_.elastic->min_nodes, job_.elastic->max_nodes, job_.nproc_per_node,
                    fmt::join(job_.etcd->endpoints, ","), job_.run_id, s.host, s.port, placed));
  } else if (job_.elastic) {
    log::info("mcirun: elastic job of {} to {} nodes, {} process(es) on this node, {} the store {}:{}{}",
              job_.elastic->min_nodes, job_.elastic->max_nodes, job_.nproc_per_node,
              s.hosted_here ? "hosting" : "using", s.host, s.port, placed);
  } else if (s.replicated) {
    say(
        fmt::format("mcirun: node {} of {}, {} process(es) on this node, the job's store on etcd ({}, job '{}') "
                    "through this node's relay {}:{}{}",
                    job_.node_rank, job_.nnodes, job_.nproc_per_node, fmt::join(job_.etcd->endpoints, ","), job_.run_id,
                    s.host, s.port, placed));
  } else {
    log::info("mcirun: node {} of {}, {} process(es) on this node, store {}:{}{}", job_.node_rank, job_.nnodes,
              job_.nproc_per_node, s.host, s.port, placed);
  }
  // A job set to outlive a lost node still ends with this one: say so once,
  // where the store is, with the way out.
  const bool outlives_a_node = job_.on_rank_loss != OnRankLoss::stop || job_.max_restarts > 0 || job_.elastic;
  if (!s.replicated && s.hosted_here && (job_.nnodes > 1 || job_.elastic) && outlives_a_node) {
    say("mcirun: this node (node 0) holds the job's store: losing it ends the job, whatever --on-rank-loss or "
        "--max-restarts say; with --rdzv_backend=etcd-v2 --rdzv_endpoint=HOST:2379,... the store is on an etcd "
        "cluster and the job outlives any node (docs/fault-tolerance.md)");
  }
  if (s.token.empty()) {
    say("mcirun: MCI_JOB_TOKEN is not set: this multi-node job's store and connections are not "
        "authenticated; export the same MCI_JOB_TOKEN on every node to protect them.");
  }
}

std::optional<int> JobRun::agree_program_port() {
  set_omp_ = omp_default_needed(env_, job_.nproc_per_node);
  if (set_omp_) say(omp_banner());
  ProgramPortOptions ports;
  ports.store = base_.store;
  ports.wait_limit = job_.join_timeout;
  try {
    if (job_.elastic && base_.store.replicated) {
      // Any node may run rank 0: each holds a port, and the attempt's
      // GROUP_RANK 0 publishes its own (meet_elastic).
      program_port_.emplace();
      return std::nullopt;
    }
    if (base_.store.hosted_here) {
      program_port_.emplace();
      // On etcd without --master_addr, node 0's address toward etcd.
      const std::string here = job_.etcd && job_.master_addr.empty() ? base_.store.host : job_.master_addr;
      const ProgramEndpoint e{job_.local_addr.value_or(here), program_port_->port(),
                              on_rank_loss_name(job_.on_rank_loss)};
      publish_program_endpoint(ports, e);
      base_.program_addr = e.addr;
      base_.program_port = e.port;
    } else {
      int stop_signal = 0;
      const auto e = fetch_program_endpoint(ports, signals_, &stop_signal);
      if (!e) return 128 + stop_signal;
      base_.program_addr = e->addr;
      base_.program_port = e->port;
      if (e->on_rank_loss != on_rank_loss_name(job_.on_rank_loss)) {
        return refuse_other_on_rank_loss(job_, base_, e->on_rank_loss);
      }
    }
  } catch (const Error& e) {
    say(fmt::format("mcirun: cannot agree on the program's MASTER_PORT with node 0: {}", e.what()));
    return 1;
  }
  return std::nullopt;
}

std::optional<int> JobRun::agree_node_sizes() {
  if (job_.nnodes < 2 || job_.elastic) return std::nullopt;
  NodeSizesOptions o;
  o.store = base_.store;
  o.nnodes = job_.nnodes;
  o.node_rank = job_.node_rank;
  o.nproc = job_.nproc_per_node;
  o.hosts_store = base_.store.hosted_here;
  o.news_key = attempt_key(base_.index, "failed");  // NodeLink's failed_key()
  o.wait_limit = job_.join_timeout;
  try {
    int stop_signal = 0;
    std::string news;
    const auto sizes = launch::agree_node_sizes(o, signals_, &stop_signal, &news);
    if (!sizes && !news.empty()) {
      const auto e = NodeLink::parse_news(news, job_.node_rank);
      say(fmt::format("mcirun: another node failed, {}", e ? e->text : news));
      return 1;
    }
    if (!sizes) {
      say(fmt::format("mcirun: received {} while the nodes were meeting", signal_name(stop_signal)));
      return 128 + stop_signal;
    }
    base_.first_rank = sizes->first_rank(job_.node_rank);
    node_nproc_ = sizes->nproc;
    base_.world = sizes->world();
    other_node_addr_ = sizes->other_node_addr;
    std::string counts;
    for (int n : sizes->nproc) counts += (counts.empty() ? "" : " + ") + std::to_string(n);
    log::info("mcirun: world size {} ({} process(es) on the {} nodes); this node runs ranks {} to {}", base_.world,
              counts, job_.nnodes, base_.first_rank, base_.first_rank + job_.nproc_per_node - 1);
  } catch (const Error& e) {
    say(fmt::format("mcirun: cannot agree with the other nodes on how many processes each runs: {}", e.what()));
    return 1;
  }
  return std::nullopt;
}

std::optional<int> JobRun::prepare_node() {
  choose_interfaces();
  // With --log-dir (or -r/-t) the logs and error files stay, one attempt_N
  // folder per start of the job (torchrun's layout).
  if (job_.logs.wants_folder()) {
    try {
      folders_.emplace(job_.logs.log_dir, job_.run_id, job_.nproc_per_node);
      say(fmt::format("mcirun: the processes' logs are in {}/LOCAL_RANK/ (stdout.log, stderr.log, error.json)",
                      folders_->attempt_dir()));
    } catch (const Error& e) {
      say(fmt::format("mcirun: {}", e.what()));
      return 1;
    }
  }
  python_path_ = mci_python_path();
  env_base_ = current_environment();
  if (auto rc = probe_torch_and_store()) return *rc;
  cpus_ = place_ranks(job_, base_);
  host_ = host_name();
  if (auto rc = start_monitor()) return *rc;
  // --nnodes MIN:MAX: the nodes meet before each attempt.
  if (job_.elastic) {
    try {
      rdzv_ = std::make_unique<ElasticRendezvous>(job_, base_.store);
    } catch (const Error& e) {
      say(fmt::format("mcirun: cannot reach the job's store at {}:{} to join the elastic job: {}", base_.store.host,
                      base_.store.port, e.what()));
      return 1;
    }
  }
  return std::nullopt;
}

// The interface this node's processes are reached at, across nodes: the
// route toward node 0; on node 0, the route toward node 1 (node 0's own
// name may resolve to 127.0.1.1 here, and a loopback address is useless to
// the other nodes). What the user exported wins.
void JobRun::choose_interfaces() {
  if (job_.nnodes < 2) return;
  const bool toward_node1 = base_.store.hosted_here && !other_node_addr_.empty();
  const std::string target = toward_node1 ? other_node_addr_ : toward_;
  const auto route = route_toward(target);
  if (!route || is_loopback_address(route->address)) {
    // A loopback target is a job whose nodes all run on this machine (tests,
    // a try-out): loopback is then right.
    const bool all_here = is_loopback_address(target) || target == "localhost";
    if (route && !all_here) {
      say(
          fmt::format("mcirun: warning: this node reaches {} over loopback ({}): the other nodes cannot reach its "
                      "processes there; give --master_addr an address the other nodes reach, or export "
                      "MCI_SOCKET_IFNAME",
                      target, route->address));
    }
    return;
  }
  const char* who = toward_node1 ? "node 1" : "node 0";
  if (!env_("GLOO_SOCKET_IFNAME") && !route->interface.empty()) {
    base_.gloo_ifname = route->interface;
    log::info(
        "mcirun: GLOO_SOCKET_IFNAME={} for the processes (the interface toward {} at {}); export it to choose "
        "another",
        base_.gloo_ifname, who, target);
  }
  const bool named =
      env_("MCI_HOST_ADDR") || env_("MCI_SOCKET_IFNAME") || env_("NCCL_SOCKET_IFNAME") || env_("GLOO_SOCKET_IFNAME");
  if (toward_node1 && !named) {
    base_.host_addr = route->address;
    log::info("mcirun: this node's processes are reached at {} (interface {}, toward node 1 at {})", route->address,
              route->interface, target);
  }
}

std::optional<int> JobRun::probe_torch_and_store() {
  if (!job_.program.python.empty() && (!env_("NCCL_ASYNC_ERROR_HANDLING") || job_.on_rank_loss != OnRankLoss::stop)) {
    const TorchProbe probe = probe_torch(job_.program.python, env_base_, signals_);
    base_.torch = probe.version;
    if (probe.timed_out) {
      say(
          fmt::format("mcirun: {} did not say within 10 s which torch it has: the processes get "
                      "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (torch 2.2 and later); for an older torch, export "
                      "NCCL_ASYNC_ERROR_HANDLING=1",
                      job_.program.python));
    }
  }
  // A torch job that goes on after a lost rank keeps torch's store out of
  // its ranks, on node 0's launcher (torch_store.hpp), for every attempt.
  base_.agent_store = base_.torch && job_.on_rank_loss != OnRankLoss::stop;
  if (base_.agent_store && base_.store.hosted_here) {
    try {
      torch_store_.emplace(job_.program.python, env_base_, base_.program_port, signals_);
    } catch (const Error& e) {
      say(fmt::format("mcirun: --on-rank-loss={} keeps torch's store on this launcher, but {}",
                      on_rank_loss_name(job_.on_rank_loss), e.what()));
      return 1;
    }
  }
  return std::nullopt;
}

// --monitor: every node reads its ranks; node 0 also serves the page.
std::optional<int> JobRun::start_monitor() {
  if (!job_.monitor) return std::nullopt;
  try {
    dumps_.emplace(env_);
    if (guardian_ && !dumps_->made().empty()) guardian_->watch_empty_dir(dumps_->made());
    jobview::MonitorOptions o;
    o.host = job_.monitor->host;
    o.port = job_.monitor->port;
    o.open = job_.monitor->open;
    o.token = env_("MCI_JOB_TOKEN").value_or("");
    o.node_rank = base_.store.hosted_here ? 0 : std::max(job_.node_rank, 1);
    o.nnodes = job_.elastic ? job_.elastic->max_nodes : job_.nnodes;
    o.world = base_.world;
    o.store = base_.store;
    for (const auto& w : job_.program.argv) o.program += (o.program.empty() ? "" : " ") + w;
    if (o.program.size() > 200) o.program = o.program.substr(0, 200) + "...";
    o.dump_dir = dumps_->where();
    o.replicated = base_.store.replicated;
    o.say = [](const std::string& line) { say(line); };
    monitor_ = std::make_unique<jobview::JobMonitor>(o);
    if (!monitor_->url().empty()) {
      const std::string u = monitor_->url();
      const std::string tail = o.token.empty() || jobview::is_loopback(o.host) ? "" : "?token=$MCI_JOB_TOKEN";
      say(
          fmt::format("mcirun: watching the job at {}{} (JSON: {}api/v1/job, Prometheus: {}metrics); "
                      "flight-recorder dumps go to {}",
                      u, tail, u, u, dumps_->where()));
    }
    env_base_.insert(env_base_.end(), dumps_->env().begin(), dumps_->env().end());
  } catch (const Error& e) {
    say(fmt::format("mcirun: --monitor: {}", e.what()));
    return 1;
  }
  return std::nullopt;
}

// Node 0 of an elastic job tells nodes still waiting to join that the job
// is over; on etcd any node of the last attempt does, once the job's end is
// decided (over: not a stop signal of this node's own, which leaves the
// others to go on without it).
int JobRun::finish(int rc, bool over) {
  if (rdzv_ && (base_.store.hosted_here || (base_.store.replicated && over))) rdzv_->close(rc);
  return rc;
}

// --max-restarts: a rank's failure on any node stops every process on every
// node, and each node starts its processes again, up to N times.
int JobRun::run_attempts() {
  // Read only by a restart's join (join_attempt) and, on etcd, by the next
  // node's monitor taking the page over: no connection for nobody.
  if (job_.nnodes > 1 && !rdzv_ &&
      (job_.max_restarts > 0 || job_.on_rank_loss == OnRankLoss::replace || (base_.store.replicated && job_.monitor))) {
    try {
      presence_.emplace(base_.store, job_.node_rank);
    } catch (const Error& e) {
      say(fmt::format("mcirun: cannot reach the job's store: {}", e.what()));
      return 1;
    }
  }
  for (int index = 0;; ++index) {
    Attempt a = base_;
    a.index = index;
    if (rdzv_) {
      if (auto rc = meet_elastic(a)) return finish(*rc, *rc == 1);
      index = a.index;
    }
    const Outcome out = run_attempt(a);
    if (out.ended) return finish(*out.ended, false);
    // The job's end, said to nodes still waiting: its success only by the
    // attempt's GROUP_RANK 0 on etcd, which waited for the other nodes
    // first (another node's own ranks may succeed while a rank elsewhere
    // still fails); a failure past --max-restarts by any node.
    const bool leads = rdzv_ && (base_.store.hosted_here || a.node_rank == 0);
    if (auto rc = decide(a, out)) return finish(*rc, out.rc == 0 ? leads : out.rank_failed);
  }
}

std::optional<int> JobRun::meet_elastic(Attempt& a) {
  try {
    while (true) {
      JoinOutcome j = rdzv_->join(a.index, signals_);
      if (j.signal != 0) {
        say(fmt::format("mcirun: received {} while the nodes were meeting for attempt {}", signal_name(j.signal),
                        a.index));
        return 128 + j.signal;
      }
      if (j.job_ended) {
        say(fmt::format("mcirun: {} ended the job ({}) while this node waited to join attempt {}",
                        base_.store.replicated ? "the nodes of its last attempt" : "node 0",
                        *j.job_ended == 0 ? "it succeeded" : fmt::format("exit code {}", *j.job_ended), a.index));
        return *j.job_ended == 0 ? 0 : 1;
      }
      const Membership m = *j.membership;
      a.index = m.attempt;
      a.nnodes = static_cast<int>(m.nodes.size());
      a.node_rank = m.group_rank;
      a.first_rank = m.first_rank();
      a.world = m.world_size();
      say("mcirun: " + describe_membership(m, *job_.elastic));
      if (base_.store.replicated) {
        try {
          if (auto rc = agree_attempt_endpoint(a, m)) return rc;
        } catch (const ProgramOwnerLost& lost) {
          // GROUP_RANK 0 went before it said where rank 0 listens: nothing
          // ran, and every other node finds the same; they meet again
          // without it.
          const ElasticNode& owner = m.nodes.front();
          say(
              fmt::format("mcirun: attempt {}'s GROUP_RANK 0 ({}, mcirun pid {}) is lost before it said where "
                          "rank 0 listens ({}): the nodes meet again without it for attempt {}",
                          m.attempt, owner.host, owner.pid, lost.what(), m.attempt + 1));
          rdzv_->mark_lost(owner.id, lost.what());
          members_ = m;
          a = base_;
          a.index = m.attempt + 1;
          continue;
        }
      }
      members_ = m;
      break;
    }
  } catch (const Error& e) {
    if (base_.store.hosted_here) {
      say(fmt::format("mcirun: cannot start attempt {}: {}", a.index, e.what()));
    } else if (base_.store.replicated) {
      say(fmt::format("mcirun: cannot start attempt {} on the job's store on etcd: {}", a.index, e.what()));
    } else {
      say(
          fmt::format("mcirun: lost node 0, which holds the job's store at {}:{} ({}): an elastic job cannot go "
                      "on without it; the job ends here",
                      a.store.host, a.store.port, e.what()));
    }
    return 1;
  }
  return std::nullopt;
}

// On etcd, an elastic attempt's GROUP_RANK 0 leads it as node 0 leads a
// fixed job: it publishes where the program's rank 0 listens (its own
// reserved port) and waits for the other nodes at the end. When the node
// that ran rank 0 is lost, rank 0 moves: the job says where.
std::optional<int> JobRun::agree_attempt_endpoint(Attempt& a, const Membership& m) {
  a.store.hosted_here = m.group_rank == 0;
  if (members_ && !members_->nodes.empty() && members_->nodes.front().id != m.nodes.front().id) {
    const ElasticNode& was = members_->nodes.front();
    const ElasticNode& now = m.nodes.front();
    say(
        fmt::format("mcirun: attempt {}: rank 0 now runs on {} (mcirun pid {}), GROUP_RANK 0; it ran on {} (mcirun "
                    "pid {}), which is not in this attempt",
                    a.index, now.host, now.pid, was.host, was.pid));
  }
  ProgramPortOptions ports;
  ports.store = a.store;
  ports.wait_limit = job_.join_timeout;
  ports.scope = fmt::format("/attempt/{}", a.index);
  auto beats = std::make_shared<BeatTracker>(job_.elastic->lost_after());
  ports.owner_gone = [this, beats, id = m.nodes.front().id]() -> std::optional<std::string> {
    std::string why;
    if (rdzv_->lost(*beats, id, &why)) return why;
    return std::nullopt;
  };
  if (a.store.hosted_here) {
    // The same command line on every node: --master_addr names no one
    // node here; the address toward etcd, or --local_addr.
    const ProgramEndpoint e{job_.local_addr.value_or(a.store.host), program_port_->port(),
                            on_rank_loss_name(job_.on_rank_loss)};
    publish_program_endpoint(ports, e);
    a.program_addr = e.addr;
    a.program_port = e.port;
    return std::nullopt;
  }
  int stop_signal = 0;
  const auto e = fetch_program_endpoint(ports, signals_, &stop_signal);
  if (!e) {
    say(fmt::format("mcirun: received {} while the nodes were meeting for attempt {}", signal_name(stop_signal),
                    a.index));
    return 128 + stop_signal;
  }
  a.program_addr = e->addr;
  a.program_port = e->port;
  return std::nullopt;
}

JobRun::Outcome JobRun::run_attempt(const Attempt& attempt) {
  Attempt a = attempt;
  // Otherwise the error files live in a folder of mcirun's, a fresh one per
  // attempt (an old attempt's exception must not read as the new one's),
  // removed with it.
  std::optional<ErrorFiles> error_files;
  std::optional<Guardian::WatchedDir> guarded;  // destroyed before error_files: declared after it
  try {
    if (folders_) {
      a.log_dir = a.index == 0 ? folders_->attempt_dir() : folders_->make_attempt(a.index);
    } else {
      error_files.emplace(a.rank_of(0), a.nproc_per_node);
      a.error_dir = error_files->dir();
      guarded.emplace(guardian_, a.error_dir);
    }
  } catch (const Error& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return ended(1);
  }
  if (a.index > 0 && a.nnodes > 1 && !rdzv_) {
    try {
      if (const auto sig = join_attempt(link_options(a), job_.join_timeout, signals_)) {
        say(fmt::format("mcirun: received {} while waiting for the other nodes to restart", signal_name(*sig)));
        return ended(128 + *sig);
      }
    } catch (const Error& e) {
      say(fmt::format("mcirun: cannot restart the job: {}", e.what()));
      return ended(1);
    }
  }
  std::unique_ptr<NodeLink> link;
  if (a.nnodes > 1) {
    NodeLinkOptions o = link_options(a);
    try {
      o.silence_limit =
          std::chrono::milliseconds(read_integer_setting("MCI_NODE_SILENCE_MS", env_("MCI_NODE_SILENCE_MS")));
    } catch (const ConfigError& e) {
      say(fmt::format("mcirun: {}; using {} ms", e.what(), o.silence_limit.count()));
    }
    link = std::make_unique<NodeLink>(o);
  }
  // Node 0 of an elastic job: a node lost while the attempt runs fails it.
  std::unique_ptr<MemberWatch> watch;
  if (rdzv_ && members_ && rdzv_->watches() && a.nnodes > 1) {
    watch = std::make_unique<MemberWatch>(a.store, a.index, rdzv_->watched(*members_), job_.elastic->lost_after(),
                                          std::min<std::chrono::milliseconds>(job_.elastic->keep_alive,
                                                                              std::chrono::milliseconds(500)));
  }
  std::vector<RankSpec> ranks;
  for (int local = 0; local < a.nproc_per_node; ++local) {
    const int rank = a.rank_of(local);
    ranks.push_back({rank, local, child_environment(env_base_, job_, a, local, set_omp_, python_path_),
                     cpus_[static_cast<std::size_t>(local)],
                     plan_streams(job_.logs, a.log_dir, RankLabel{job_.role, rank, local, host_}, job_.prefix)});
  }
  Supervisor sup(job_, a, signals_, link.get(), monitor_.get(), guardian_);
  // A node lost whole under replace: the first surviving node to claim it
  // starts its ranks again (nodes/node_adopter.hpp).
  std::unique_ptr<NodeAdopter> adopter;
  if (presence_ && job_.on_rank_loss == OnRankLoss::replace &&
      node_nproc_.size() == static_cast<std::size_t>(a.nnodes)) {
    adopter = std::make_unique<NodeAdopter>(NodeAdopterOptions{a.store, a.nnodes, a.node_rank, a.index, node_nproc_});
    sup.adopt_with(adopter.get(), [this, a](int node, int first_local) {
      int first_rank = 0;
      for (int n = 0; n < node; ++n) first_rank += node_nproc_[static_cast<std::size_t>(n)];
      std::vector<RankSpec> specs;
      for (int i = 0; i < node_nproc_[static_cast<std::size_t>(node)]; ++i) {
        // Its rank, numbered here past this node's own local ranks.
        Attempt here = a;
        const int local = first_local + i;
        here.first_rank = first_rank + i - local;
        const int rank = here.rank_of(local);
        specs.push_back({rank,
                         local,
                         child_environment(env_base_, job_, here, local, set_omp_, python_path_),
                         {},
                         plan_streams(job_.logs, a.log_dir, RankLabel{job_.role, rank, local, host_}, job_.prefix)});
      }
      return specs;
    });
  }
  sup.start(ranks);
  Outcome out;
  out.rc = sup.run();
  if (watch) {
    if (const auto lost = watch->lost_node()) rdzv_->mark_lost(lost->first, lost->second);
  }
  out.rank_failed = sup.rank_failed();
  if (out.rc != 0 && out.rank_failed) out.failure_line = sup.failure_line();
  return out;
}

std::optional<int> JobRun::decide(const Attempt& a, const Outcome& out) {
  const bool failed = out.rc != 0 && out.rank_failed;
  if (failed) failures_.emplace_back(a.index, out.failure_line);
  if (!failed || a.index >= job_.max_restarts) {
    if (a.index > 0) {  // the history, also when a later start was stopped by a signal
      say(fmt::format("mcirun: the job was started {} time(s) (--max-restarts={}){}", a.index + 1, job_.max_restarts,
                      out.rc == 0 ? "; the last start succeeded" : ""));
      for (const auto& [i, line] : failures_) say(fmt::format("mcirun:   attempt {} failed: {}", i, line));
    }
    return out.rc;
  }
  const std::string line = failures_.back().second;
  say(fmt::format("mcirun: attempt {} failed ({}): restarting every process, restart {} of {}", a.index, line,
                  a.index + 1, job_.max_restarts));
  if (monitor_) {
    monitor_->event("restart", fmt::format("attempt {} failed ({}); restart {} of {}", a.index, line, a.index + 1,
                                           job_.max_restarts));
  }
  return std::nullopt;
}

}  // namespace mci::launch
