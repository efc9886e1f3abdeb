#include "launch/launcher.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/cpus.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "jobview/job_monitor.hpp"
#include "launch/child_env.hpp"
#include "launch/elastic_rendezvous.hpp"
#include "launch/error_files.hpp"
#include "launch/fd_budget.hpp"
#include "launch/fr_dumps.hpp"
#include "launch/heartbeat.hpp"
#include "launch/node_link.hpp"
#include "launch/program_port.hpp"
#include "launch/python_path.hpp"
#include "launch/signals.hpp"
#include "launch/stream_relay.hpp"
#include "launch/supervisor.hpp"
#include "launch/torch_store.hpp"
#include "launch/torch_version.hpp"
#include "launch/worker_logs.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "topo/binding.hpp"
#include "topo/cpu_sets.hpp"
#include "topo/live_import.hpp"

namespace mci::launch {

namespace {

// A child's pipe must never land on fd 0, 1 or 2 of mcirun (dup2 onto itself
// would keep O_CLOEXEC and the program would start without its output), so
// a closed standard fd is reopened on /dev/null first.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    const int n = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (n >= 0 && n != fd) {
      ::dup2(n, fd);
      ::close(n);
    }
  }
}

// mcirun --bind: read this machine once (mci-topo's model), place each
// local rank and say where, so a slow rank can be traced to its placement.
std::vector<std::vector<int>> place_ranks(const JobConfig& job) {
  std::vector<std::vector<int>> cpus(static_cast<std::size_t>(job.nproc_per_node));
  if (job.bind == topo::BindMode::none) return cpus;
  const char* mode = job.bind == topo::BindMode::numa ? "numa" : "core";
  try {
    const topo::Topology t = topo::read_live({});
    const std::vector<topo::RankCpus> plan = topo::plan_binding(t, job.bind, job.nproc_per_node, affinity_cpus());
    for (int local = 0; local < job.nproc_per_node; ++local) {
      const topo::RankCpus& p = plan[static_cast<std::size_t>(local)];
      cpus[static_cast<std::size_t>(local)] = p.cpus;
      say(fmt::format("mcirun: --bind {}: rank {} (local {}) on CPUs {} ({})", mode, job.rank_of(local), local,
                      p.cpus.empty() ? "unchanged" : topo::cpu_list_text(p.cpus), p.why));
    }
  } catch (const Error& e) {
    say(fmt::format("mcirun: --bind {}: cannot read this machine's topology ({}); the processes start unpinned", mode,
                    e.what()));
  }
  return cpus;
}

// A node given another --on-rank-loss than node 0 would stop where the
// others go on, or the reverse: it starts nothing, and tells the other
// nodes through the store (as a failure, so they stop their ranks rather
// than wait for this node's).
// How this node reaches node 0's store, for its attempt.
NodeLinkOptions link_options(const JobConfig& job, const std::string& token, int attempt) {
  NodeLinkOptions o;
  o.host = job.master_addr;
  o.port = job.master_port;
  o.token = token;
  o.nnodes = job.nnodes;
  o.node_rank = job.node_rank;
  o.attempt = attempt;
  return o;
}

// --monitor: every node reads its ranks; node 0 also serves the page.
std::unique_ptr<jobview::JobMonitor> start_monitor(const JobConfig& job, const std::string& token, const EnvLookup& env,
                                                   const FrDumps& dumps) {
  jobview::MonitorOptions o;
  o.host = job.monitor->host;
  o.port = job.monitor->port;
  o.open = job.monitor->open;
  o.token = env("MCI_JOB_TOKEN").value_or("");
  o.store_token = token;
  o.node_rank = job.hosts_store() ? 0 : std::max(job.node_rank, 1);
  o.nnodes = job.elastic ? job.elastic->max_nodes : job.nnodes;
  o.world = job.world_size();
  o.store_host = job.master_addr;
  o.store_port = job.master_port;
  for (const auto& w : job.program.argv) o.program += (o.program.empty() ? "" : " ") + w;
  if (o.program.size() > 200) o.program = o.program.substr(0, 200) + "...";
  o.dump_dir = dumps.where();
  auto m = std::make_unique<jobview::JobMonitor>(o);
  if (!m->url().empty()) {
    const std::string u = m->url();
    const std::string tail = o.token.empty() || jobview::is_loopback(o.host) ? "" : "?token=$MCI_JOB_TOKEN";
    say(
        fmt::format("mcirun: watching the job at {}{} (JSON: {}api/v1/job, Prometheus: {}metrics); "
                    "flight-recorder dumps go to {}",
                    u, tail, u, u, dumps.where()));
  }
  return m;
}

int refuse_other_on_rank_loss(const JobConfig& job, const std::string& token, const std::string& node0s) {
  const std::string why = fmt::format(
      "--on-rank-loss={} on node {} (host {}), but node 0 runs with --on-rank-loss={}: give every node the "
      "same --on-rank-loss",
      on_rank_loss_name(job.on_rank_loss), job.node_rank, host_name(), node0s);
  say(fmt::format("mcirun: {}; this node starts nothing", why));
  NodeLink(link_options(job, token, 0))
      .report_failure(why);  // published before the link goes (its destructor waits for that)
  return 1;
}

}  // namespace

int run_job(JobConfig job, const EnvLookup& env) {
  ensure_standard_fds();
  SignalFd signals(job.stop_signals);  // before the store's thread, which must inherit the mask
  // Orphans of the ranks (a helper whose rank died) become our children, so
  // mcirun sees them exit and can wait for a rank's process group to empty.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  // Before anything starts: the job's open files fit the limits (the ranks
  // inherit ours).
  const auto connect = env("MCI_CONNECT");
  const FdCheck fds =
      ensure_fds(fd_need(job.nproc_per_node, job.world_size(), job.hosts_store(), connect && *connect == "eager"));
  if (!fds.ok) {
    say(fds.message);
    return 1;
  }
  if (!fds.message.empty()) say(fds.message);

  const std::string token = choose_token(env, job.nnodes);
  std::unique_ptr<StoreServer> store;
  if (job.elastic && !job.elastic->is_host) {
    // Neither --node_rank nor is_host says which node hosts the store:
    // the first mcirun that can bind --master_addr:--master_port does
    // (torchrun c10d's rule); the others reach it there.
    try {
      store = std::make_unique<StoreServer>(StoreServerOptions{job.master_addr, job.master_port, token});
      job.elastic->is_host = true;
    } catch (const Error& e) {
      job.elastic->is_host = false;
      log::info("mcirun: another node hosts the job's store ({}:{} cannot be bound here: {})", job.master_addr,
                job.master_port, e.what());
    }
  }
  if (job.hosts_store() && !store) {
    try {
      store = std::make_unique<StoreServer>(StoreServerOptions{job.master_addr, job.master_port, token});
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find("already in use") != std::string::npos) {
        // The library's wording suggests MASTER_PORT, which is right for a
        // program that hosts its own store but not here: mcirun reads only
        // its command line (torchrun does the same).
        say(
            fmt::format("mcirun: cannot host the job's store: port {} on {} is already in use: give a free "
                        "port with --master_port=N (mcirun ignores MASTER_PORT, as torchrun does), or run a "
                        "one-node job with --standalone (mcirun picks a free port), or stop the process that "
                        "holds it",
                        job.master_port, job.master_addr));
      } else {
        say(
            fmt::format("mcirun: cannot host the job's store: {} (node 0 hosts it: --master_addr={} must be an "
                        "address of this host)",
                        what, job.master_addr));
      }
      return 1;
    }
    job.master_port = store->port();
  }
  if (job.elastic) {
    log::info("mcirun: elastic job of {} to {} nodes, {} process(es) on this node, {} the store {}:{}{}",
              job.elastic->min_nodes, job.elastic->max_nodes, job.nproc_per_node,
              job.hosts_store() ? "hosting" : "using", job.master_addr, job.master_port,
              job.placement_source.empty() ? "" : " (placed by " + job.placement_source + ")");
  } else {
    log::info("mcirun: node {} of {}, {} process(es) per node, world size {}, store {}:{}{}", job.node_rank, job.nnodes,
              job.nproc_per_node, job.world_size(), job.master_addr, job.master_port,
              job.placement_source.empty() ? "" : " (placed by " + job.placement_source + ")");
  }
  if (token.empty()) {
    say("mcirun: MCI_JOB_TOKEN is not set: this multi-node job's store and connections are not "
        "authenticated; export the same MCI_JOB_TOKEN on every node to protect them.");
  }
  const bool set_omp = omp_default_needed(env, job.nproc_per_node);
  if (set_omp) say(omp_banner());

  ProgramPortOptions ports{job.master_addr, job.master_port, token};
  ports.wait_limit = job.join_timeout;
  // Node 0 holds the program's port until the job ends, so that no other
  // job can be handed it before rank 0 binds it (program_port.hpp).
  std::optional<PortReservation> program_port;
  try {
    if (job.hosts_store()) {
      program_port.emplace();
      const ProgramEndpoint e{job.local_addr.value_or(job.master_addr), program_port->port(),
                              on_rank_loss_name(job.on_rank_loss)};
      publish_program_endpoint(ports, e);
      job.program_addr = e.addr;
      job.program_port = e.port;
    } else {
      int stop_signal = 0;
      const auto e = fetch_program_endpoint(ports, signals, &stop_signal);
      if (!e) return 128 + stop_signal;
      job.program_addr = e->addr;
      job.program_port = e->port;
      if (e->on_rank_loss != on_rank_loss_name(job.on_rank_loss)) {
        return refuse_other_on_rank_loss(job, token, e->on_rank_loss);
      }
    }
  } catch (const Error& e) {
    say(fmt::format("mcirun: cannot agree on the program's MASTER_PORT with node 0: {}", e.what()));
    return 1;
  }
  if (job.nnodes > 1 && !env("GLOO_SOCKET_IFNAME")) {
    job.gloo_ifname = interface_toward(job.master_addr);
    if (!job.gloo_ifname.empty()) {
      log::info(
          "mcirun: GLOO_SOCKET_IFNAME={} for the processes (the interface toward node 0 at {}); export it "
          "to choose another",
          job.gloo_ifname, job.master_addr);
    }
  }
  // With --log-dir (or -r/-t) the logs and error files stay, one attempt_N
  // folder per start of the job (torchrun's layout).
  std::optional<LogFolders> folders;
  if (job.logs.wants_folder()) {
    try {
      folders.emplace(job.logs.log_dir, job.run_id, job.nproc_per_node);
      say(fmt::format("mcirun: the processes' logs are in {}/LOCAL_RANK/ (stdout.log, stderr.log, error.json)",
                      folders->attempt_dir()));
    } catch (const Error& e) {
      say(fmt::format("mcirun: {}", e.what()));
      return 1;
    }
  }
  const std::string python_path = mci_python_path();
  std::vector<std::string> base = current_environment();
  if (!job.program.python.empty() && (!env("NCCL_ASYNC_ERROR_HANDLING") || job.on_rank_loss != OnRankLoss::stop)) {
    const TorchProbe probe = probe_torch(job.program.python, base, signals);
    job.torch = probe.version;
    if (probe.timed_out) {
      say(
          fmt::format("mcirun: {} did not say within 10 s which torch it has: the processes get "
                      "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (torch 2.2 and later); for an older torch, export "
                      "NCCL_ASYNC_ERROR_HANDLING=1",
                      job.program.python));
    }
  }
  // A torch job that goes on after a lost rank keeps torch's store out of
  // its ranks, on node 0's launcher (torch_store.hpp), for every attempt.
  job.agent_store = job.torch && job.on_rank_loss != OnRankLoss::stop;
  std::optional<TorchStoreKeeper> torch_store;
  if (job.agent_store && job.hosts_store()) {
    try {
      torch_store.emplace(job.program.python, base, job.program_port, signals);
    } catch (const Error& e) {
      say(fmt::format("mcirun: --on-rank-loss={} keeps torch's store on this launcher, but {}",
                      on_rank_loss_name(job.on_rank_loss), e.what()));
      return 1;
    }
  }
  const std::vector<std::vector<int>> cpus = place_ranks(job);
  const std::string host = host_name();
  std::unique_ptr<jobview::JobMonitor> monitor;
  std::optional<FrDumps> dumps;
  if (job.monitor) {
    try {
      dumps.emplace(env);
      monitor = start_monitor(job, token, env, *dumps);
      base.insert(base.end(), dumps->env().begin(), dumps->env().end());
    } catch (const Error& e) {
      say(fmt::format("mcirun: --monitor: {}", e.what()));
      return 1;
    }
  }

  // --nnodes MIN:MAX: the nodes meet before each attempt.
  std::unique_ptr<ElasticRendezvous> rdzv;
  if (job.elastic) {
    try {
      rdzv = std::make_unique<ElasticRendezvous>(job, token);
    } catch (const Error& e) {
      say(fmt::format("mcirun: cannot reach the job's store at {}:{} to join the elastic job: {}", job.master_addr,
                      job.master_port, e.what()));
      return 1;
    }
  }
  // Node 0 of an elastic job tells nodes still waiting to join that the job is over.
  auto finish = [&](int rc) {
    if (rdzv && job.hosts_store()) rdzv->close(rc);
    return rc;
  };

  // --max-restarts: a rank's failure on any node stops every process on
  // every node, and each node starts its processes again, up to N times.
  std::vector<std::pair<int, std::string>> failures;  // each failed attempt's, for the last summary
  for (int attempt = 0;; ++attempt) {
    std::optional<Membership> members;
    if (rdzv) {
      try {
        JoinOutcome j = rdzv->join(attempt, signals);
        if (j.signal != 0) {
          say(fmt::format("mcirun: received {} while the nodes were meeting for attempt {}", signal_name(j.signal),
                          attempt));
          return finish(128 + j.signal);
        }
        if (j.job_ended) {
          say(fmt::format("mcirun: node 0 ended the job ({}) before this node could join it: nothing ran here",
                          *j.job_ended == 0 ? "it succeeded" : fmt::format("exit code {}", *j.job_ended)));
          return *j.job_ended == 0 ? 0 : 1;
        }
        members = std::move(j.membership);
      } catch (const Error& e) {
        if (job.hosts_store()) {
          say(fmt::format("mcirun: cannot start attempt {}: {}", attempt, e.what()));
        } else {
          say(
              fmt::format("mcirun: lost node 0, which holds the job's store at {}:{} ({}): an elastic job cannot go "
                          "on without it; the job ends here",
                          job.master_addr, job.master_port, e.what()));
        }
        return finish(1);
      }
      attempt = members->attempt;
      job.nnodes = static_cast<int>(members->nodes.size());
      job.node_rank = members->group_rank;
      job.first_rank = members->first_rank();
      job.world = members->world_size();
      say("mcirun: " + describe_membership(*members, *job.elastic));
    }
    job.restart_count = attempt;
    // Otherwise the error files live in a folder of mcirun's, a fresh one
    // per attempt (an old attempt's exception must not read as the new
    // one's), removed with it.
    std::optional<ErrorFiles> error_files;
    try {
      if (folders) {
        job.log_attempt_dir = attempt == 0 ? folders->attempt_dir() : folders->make_attempt(attempt);
      } else {
        error_files.emplace(job.rank_of(0), job.nproc_per_node);
        job.error_dir = error_files->dir();
      }
    } catch (const Error& e) {
      say(fmt::format("mcirun: {}", e.what()));
      return finish(1);
    }
    NodeLinkOptions o = link_options(job, token, attempt);
    if (attempt > 0 && job.nnodes > 1 && !rdzv) {
      try {
        if (const auto sig = join_attempt(o, job.join_timeout, signals)) {
          say(fmt::format("mcirun: received {} while waiting for the other nodes to restart", signal_name(*sig)));
          return 128 + *sig;
        }
      } catch (const Error& e) {
        say(fmt::format("mcirun: cannot restart the job: {}", e.what()));
        return 1;
      }
    }
    std::unique_ptr<NodeLink> link;
    if (job.nnodes > 1) link = std::make_unique<NodeLink>(o);
    // Node 0 of an elastic job: a node lost while the attempt runs fails it.
    std::unique_ptr<MemberWatch> watch;
    if (rdzv && members && job.hosts_store() && job.nnodes > 1) {
      watch = std::make_unique<MemberWatch>(StoreAddress{job.master_addr, job.master_port, token}, attempt,
                                            rdzv->watched(*members), job.elastic->lost_after(),
                                            std::min<std::chrono::milliseconds>(job.elastic->keep_alive,
                                                                                std::chrono::milliseconds(500)));
    }

    std::vector<RankSpec> ranks;
    for (int local = 0; local < job.nproc_per_node; ++local) {
      const int rank = job.rank_of(local);
      ranks.push_back(
          {rank, local, child_environment(base, job, local, token, set_omp, python_path),
           cpus[static_cast<std::size_t>(local)],
           plan_streams(job.logs, job.log_attempt_dir, RankLabel{job.role, rank, local, host}, job.prefix)});
    }
    Supervisor sup(job, signals, link.get(), monitor.get());
    sup.start(ranks);
    const int rc = sup.run();
    if (watch) {
      if (const auto lost = watch->lost_node()) rdzv->mark_lost(lost->first, lost->second);
      watch.reset();
    }
    const bool again = rc != 0 && sup.rank_failed() && attempt < job.max_restarts;
    if (rc != 0 && sup.rank_failed()) failures.emplace_back(attempt, sup.failure_line());
    if (!again) {
      if (attempt > 0) {  // the history, also when a later start was stopped by a signal
        say(fmt::format("mcirun: the job was started {} time(s) (--max-restarts={}){}", attempt + 1, job.max_restarts,
                        rc == 0 ? "; the last start succeeded" : ""));
        for (const auto& [a, line] : failures) say(fmt::format("mcirun:   attempt {} failed: {}", a, line));
      }
      return finish(rc);
    }
    say(fmt::format("mcirun: attempt {} failed ({}): restarting every process, restart {} of {}", attempt,
                    failures.back().second, attempt + 1, job.max_restarts));
    if (monitor) {
      monitor->event("restart", fmt::format("attempt {} failed ({}); restart {} of {}", attempt, failures.back().second,
                                            attempt + 1, job.max_restarts));
    }
  }
}

namespace {

// pet_env: where the PET_ twins of torchrun's flags are read.
int launch(const std::vector<std::string>& argv, const EnvLookup& pet_env) {
  const EnvLookup env = process_env();
  CliOutcome cli;
  try {
    cli = parse_cli(argv, pet_env);
  } catch (const UsageError& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 2;
  }
  if (!cli.args) {
    write_all(STDOUT_FILENO, cli.message);
    return cli.exit_code;
  }
  JobConfig job;
  try {
    job = resolve_job(*cli.args, env);
  } catch (const UsageError& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 2;
  } catch (const Error& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 1;
  }
  for (const auto& n : job.notices) say(n);
  try {
    return run_job(std::move(job), env);
  } catch (const std::exception& e) {
    say(fmt::format("mcirun: internal error: {}", e.what()));
    return 1;
  }
}

}  // namespace

int mcirun_main(const std::vector<std::string>& argv) { return launch(argv, process_env()); }

int run_local_job(int nproc, const std::vector<std::string>& command) {
  std::vector<std::string> argv{"mcirun", "--standalone", "--nproc_per_node=" + std::to_string(nproc), "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  // A tool's own ranks (mci-perf -g): the PET_ variables of a torchrun
  // user's environment are not meant for them.
  return launch(argv, fixed_env({}));
}

}  // namespace mci::launch
