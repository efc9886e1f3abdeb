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
#include "launch/child_env.hpp"
#include "launch/error_files.hpp"
#include "launch/fd_budget.hpp"
#include "launch/node_link.hpp"
#include "launch/program_port.hpp"
#include "launch/python_path.hpp"
#include "launch/signals.hpp"
#include "launch/stream_relay.hpp"
#include "launch/supervisor.hpp"
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
  if (job.hosts_store()) {
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
  log::info("mcirun: node {} of {}, {} process(es) per node, world size {}, store {}:{}{}", job.node_rank, job.nnodes,
            job.nproc_per_node, job.world_size(), job.master_addr, job.master_port,
            job.placement_source.empty() ? "" : " (placed by " + job.placement_source + ")");
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
      const ProgramEndpoint e{job.local_addr.value_or(job.master_addr), program_port->port()};
      publish_program_endpoint(ports, e);
      job.program_addr = e.addr;
      job.program_port = e.port;
    } else {
      int stop_signal = 0;
      const auto e = fetch_program_endpoint(ports, signals, &stop_signal);
      if (!e) return 128 + stop_signal;
      job.program_addr = e->addr;
      job.program_port = e->port;
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
  const std::vector<std::string> base = current_environment();
  if (!job.program.python.empty() && !env("NCCL_ASYNC_ERROR_HANDLING")) {
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
  const std::vector<std::vector<int>> cpus = place_ranks(job);
  const std::string host = host_name();

  // --max-restarts: a rank's failure on any node stops every process on
  // every node, and each node starts its processes again, up to N times.
  std::vector<std::string> failures;  // each attempt's, for the last summary
  for (int attempt = 0;; ++attempt) {
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
      return 1;
    }
    NodeLinkOptions o;
    o.host = job.master_addr;
    o.port = job.master_port;
    o.token = token;
    o.nnodes = job.nnodes;
    o.node_rank = job.node_rank;
    o.attempt = attempt;
    if (attempt > 0 && job.nnodes > 1) {
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

    std::vector<RankSpec> ranks;
    for (int local = 0; local < job.nproc_per_node; ++local) {
      const int rank = job.rank_of(local);
      ranks.push_back(
          {rank, local, child_environment(base, job, local, token, set_omp, python_path),
           cpus[static_cast<std::size_t>(local)],
           plan_streams(job.logs, job.log_attempt_dir, RankLabel{job.role, rank, local, host}, job.prefix)});
    }
    Supervisor sup(job, signals, link.get());
    sup.start(ranks);
    const int rc = sup.run();
    const bool again = rc != 0 && sup.rank_failed() && attempt < job.max_restarts;
    if (rc != 0 && sup.rank_failed()) failures.push_back(sup.failure_line());
    if (!again) {
      if (attempt > 0) {  // the history, also when a later start was stopped by a signal
        say(fmt::format("mcirun: the job was started {} time(s) (--max-restarts={}){}", attempt + 1, job.max_restarts,
                        rc == 0 ? "; the last start succeeded" : ""));
        for (std::size_t i = 0; i < failures.size(); ++i) {
          say(fmt::format("mcirun:   attempt {} failed: {}", i, failures[i]));
        }
      }
      return rc;
    }
    say(fmt::format("mcirun: attempt {} failed ({}): restarting every process, restart {} of {}", attempt,
                    failures.back(), attempt + 1, job.max_restarts));
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
