#include "group/job_coordinates.hpp"

#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/env.hpp"
#include "common/hostlist.hpp"
#include "common/scheduler_env.hpp"
#include "mci/errors.hpp"

namespace mci {

namespace {

const char* const kLookedFor =
    "Looked for: RANK and WORLD_SIZE; a Slurm job step (SLURM_PROCID, SLURM_NTASKS); Open MPI's mpirun "
    "(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE); MPICH/Hydra (PMI_RANK, PMI_SIZE); PMIx (PMIX_RANK, with a size "
    "from one of the others).";

[[noreturn]] void missing(const char* name, const std::string& hint) { throw_env_missing(name, "env://", hint); }

std::optional<long long> lookup_int(const EnvLookup& env, const char* name) { return env_int(env, name, "env://"); }

// What one launcher says about this process.
struct Source {
  std::string name;
  const char* rank_var = "";
  const char* world_var = "";
  std::optional<long long> rank, world, local_rank, local_world;
};

// Both or neither: a launcher that set one of a pair and not the other is
// not one we can trust.
void require_pair(const Source& s, const char* have, const char* lacks) {
  throw ConfigError(fmt::format(
      "Error initializing mci using env://: {} is set but {} is not, so this is not a complete {} environment. "
      "Start the program with the launcher itself (not a copy of part of its environment), or export RANK and "
      "WORLD_SIZE.",
      have, lacks, s.name));
}

std::optional<Source> mpi_source(const EnvLookup& env, std::string name, const char* rank_var, const char* world_var,
                                 const char* local_rank_var, const char* local_world_var) {
  Source s{std::move(name),
           rank_var,
           world_var,
           lookup_int(env, rank_var),
           lookup_int(env, world_var),
           lookup_int(env, local_rank_var),
           lookup_int(env, local_world_var)};
  if (!s.rank && !s.world) return std::nullopt;
  if (!s.world) require_pair(s, rank_var, world_var);
  if (!s.rank) require_pair(s, world_var, rank_var);
  return s;
}

// "2(x3),1" -> 2 2 2 1: tasks per node, in node order.
std::vector<long long> tasks_per_node(const std::string& spec) {
  std::vector<long long> out;
  std::size_t at = 0;
  while (at < spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const std::size_t paren = item.find("(x");
    const auto count = parse_int(item.substr(0, paren));
    const auto times = paren == std::string::npos ? std::optional<long long>(1)
                                                  : parse_int(item.substr(paren + 2, item.size() - paren - 3));
    if (!count || !times || *times < 1 || *times > (1 << 20) || (paren != std::string::npos && item.back() != ')')) {
      return {};
    }
    for (long long i = 0; i < *times; ++i) out.push_back(*count);
    at = comma + 1;
  }
  return out;
}

struct SlurmStep {
  Source source;
  long long job_id = -1;
  long long step_id = -1;
  std::string nodelist;
};

// A Slurm job step (srun); nullopt outside Slurm and in an sbatch script's
// batch shell, which is not a rank (`batch_shell` says so).
std::optional<SlurmStep> slurm_step(const EnvLookup& env, bool& batch_shell) {
  const auto vars = slurm_vars(env, [&](const char* name) { return lookup_int(env, name); });
  if (!vars) return std::nullopt;
  if (vars->batch_shell()) {
    batch_shell = true;
    return std::nullopt;
  }
  SlurmStep s;
  s.source.name = "Slurm";
  s.source.rank_var = "SLURM_PROCID";
  s.source.world_var = vars->ntasks_var;
  s.source.rank = vars->procid;
  s.source.world = vars->ntasks;
  if (!s.source.rank) require_pair(s.source, "SLURM_STEP_ID", "SLURM_PROCID");
  if (!s.source.world) require_pair(s.source, "SLURM_PROCID", "SLURM_NTASKS");
  s.source.local_rank = vars->local_id;
  if (vars->tasks_per_node) {
    const auto per_node = tasks_per_node(*vars->tasks_per_node);
    const auto node = vars->node_id.value_or(0);
    if (node >= 0 && static_cast<std::size_t>(node) < per_node.size()) s.source.local_world = per_node[node];
  }
  s.job_id = vars->job_id.value_or(0);
  s.step_id = *vars->step_id;
  s.nodelist = vars->nodelist;
  return s;
}

void check_agree(const Source& a, const Source& b) {
  const bool rank_differs = a.rank && b.rank && *a.rank != *b.rank;
  const bool world_differs = a.world && b.world && *a.world != *b.world;
  if (!rank_differs && !world_differs) return;
  throw ConfigError(fmt::format(
      "Error initializing mci using env://: two launchers disagree about this process: {} says rank {} of {} "
      "({}, {}), {} says rank {} of {} ({}, {}). Start the program with one launcher, or export RANK and "
      "WORLD_SIZE to say which is right.",
      a.name, a.rank.value_or(-1), a.world ? std::to_string(*a.world) : "?", a.rank_var, a.world_var, b.name,
      b.rank.value_or(-1), b.world ? std::to_string(*b.world) : "?", b.rank_var, b.world_var));
}

// A port every rank of one launch computes alike, below the ephemeral range.
int hashed_port(const std::string& job) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : job) h = (h ^ c) * 1099511628211ull;
  return kDerivedPortBase + static_cast<int>(h % kDerivedPortSpan);
}

}  // namespace

int checked_port(long long port, const std::string& where, const char* name) {
  if (port < 1 || port > 65535) {
    throw ConfigError(
        fmt::format("Error initializing mci using {}: {}={} is not a TCP port; use a "
                    "number from 1 to 65535",
                    where, name, port));
  }
  return static_cast<int>(port);
}

bool has_job_variables(const EnvLookup& env) {
  for (const char* v : kRankVariables) {
    if (env(v)) return true;
  }
  return env("WORLD_SIZE").has_value();
}

int slurm_store_port(long long job_id, long long step_id) {
  const long long key = job_id * 64 + step_id;
  return kDerivedPortBase + static_cast<int>(((key % kDerivedPortSpan) + kDerivedPortSpan) % kDerivedPortSpan);
}

JobCoordinates job_coordinates(const EnvLookup& env) {
  bool batch_shell = false;
  auto slurm = slurm_step(env, batch_shell);
  std::vector<Source> mpi;
  for (auto s : {mpi_source(env, "Open MPI", kOpenMpiRank, kOpenMpiSize, kOpenMpiLocalRank, kOpenMpiLocalSize),
                 mpi_source(env, "MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")}) {
    if (s) mpi.push_back(*s);
  }
  if (auto pmix = lookup_int(env, "PMIX_RANK")) {
    mpi.push_back(Source{"PMIx", "PMIX_RANK", "(none)", pmix, std::nullopt, std::nullopt, std::nullopt});
  }
  for (std::size_t i = 1; i < mpi.size(); ++i) check_agree(mpi[0], mpi[i]);
  const bool under_mpirun = !mpi.empty() && mpi[0].name == "Open MPI";
  // mpirun inside an allocation: Slurm's numbers are its daemons'. srun
  // --mpi=pmix or pmi2: the same process, they must agree.
  if (slurm && under_mpirun) slurm.reset();
  if (slurm) {
    for (const auto& s : mpi) check_agree(slurm->source, s);
  }

  // The launcher's view, merged: the first MPI source, completed by the
  // others and by Slurm (PMIx gives a rank alone).
  std::vector<Source> sources = mpi;
  if (slurm) sources.push_back(slurm->source);
  Source launcher;
  for (const Source& s : sources) {
    if (launcher.name.empty()) {
      launcher.name = s.name;
      launcher.rank_var = s.rank_var;
    }
    if (!launcher.rank) launcher.rank = s.rank;
    if (!launcher.world) {
      launcher.world = s.world;
      launcher.world_var = s.world_var;
    }
    if (!launcher.local_rank) launcher.local_rank = s.local_rank;
    if (!launcher.local_world) launcher.local_world = s.local_world;
  }
  if (!launcher.name.empty() && !launcher.world) {
    throw ConfigError(
        fmt::format("Error initializing mci using env://: {} is set but no launcher variable gives "
                    "the number of processes; export WORLD_SIZE. {}",
                    launcher.rank_var, kLookedFor));
  }

  const std::string hint = batch_shell ? fmt::format(
                                             "This looks like an sbatch script's batch shell (SLURM_PROCID without "
                                             "SLURM_STEP_ID), which is not a rank: start the ranks with srun. {}",
                                             kLookedFor)
                                       : kLookedFor;
  JobCoordinates c;
  const auto rank = lookup_int(env, "RANK");
  const auto world = lookup_int(env, "WORLD_SIZE");
  if (!rank && !launcher.rank) missing("RANK", hint);
  if (!world && !launcher.world) missing("WORLD_SIZE", hint);
  const long long w = world ? *world : *launcher.world;
  const long long r = rank ? *rank : *launcher.rank;
  const std::string world_name = world ? "WORLD_SIZE" : launcher.world_var;
  const std::string rank_name = rank ? "RANK" : launcher.rank_var;
  const std::string by = rank && world ? "" : fmt::format(" (set by {})", launcher.name);
  c.source = rank ? "RANK/WORLD_SIZE" : launcher.name;
  if (w < 1 || w > (1 << 20)) {
    throw ConfigError(
        fmt::format("Error initializing mci using env://: {}={}{} is not a valid number of "
                    "processes; it must be at least 1",
                    world_name, w, by));
  }
  if (r < 0 || r >= w) {
    throw ConfigError(
        fmt::format("Error initializing mci using env://: {}={} is outside [0, {}={}){}; each "
                    "process needs a distinct RANK from 0 to WORLD_SIZE-1",
                    rank_name, r, world_name, w, by));
  }
  c.rank = static_cast<int>(r);
  c.world = static_cast<int>(w);
  c.local_rank = static_cast<int>(lookup_int(env, "LOCAL_RANK").value_or(launcher.local_rank.value_or(c.rank)));
  c.local_world =
      static_cast<int>(lookup_int(env, "LOCAL_WORLD_SIZE").value_or(launcher.local_world.value_or(c.world)));

  // Where the store is: MASTER_*, else a Slurm step's first node and a port
  // from its job and step ids, else (every rank on this node under an MPI
  // launcher) this host and a port from the launch's name.
  const bool one_node = !mpi.empty() && launcher.local_world && *launcher.local_world == w;
  // mcirun's own store has variables of its own, so that MASTER_ADDR and
  // MASTER_PORT stay free for the program (torch's TCPStore binds them).
  if (auto a = env("MCI_STORE_ADDR"); a && !a->empty()) {
    if (auto p = lookup_int(env, "MCI_STORE_PORT")) {
      c.host = *a;
      c.port = checked_port(*p, "env://", "MCI_STORE_PORT");
      return c;
    }
  }
  if (auto a = env("MASTER_ADDR"); a && !a->empty()) {
    c.host = *a;
  } else if (slurm && !slurm->nodelist.empty()) {
    c.host = first_host(slurm->nodelist);
  } else if (one_node) {
    c.host = "127.0.0.1";
  } else {
    missing("MASTER_ADDR", mpi.empty() ? ""
                                       : fmt::format("Under {} with ranks on several nodes, pass the host of rank 0 "
                                                     "(e.g. mpirun -x MASTER_ADDR=$(hostname) "
                                                     "-x MASTER_PORT=29500 ...).",
                                                     mpi[0].name));
  }
  if (auto p = lookup_int(env, "MASTER_PORT")) {
    c.port = checked_port(*p, "env://");
  } else if (slurm) {
    c.port = slurm_store_port(slurm->job_id, slurm->step_id);
  } else if (one_node) {
    std::string job;
    for (const char* v : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_KVSNAME"}) {
      if (auto j = env(v)) job += std::string(v) + "=" + *j + ";";
    }
    if (job.empty()) missing("MASTER_PORT", "");
    c.port = hashed_port(job);
  } else {
    missing("MASTER_PORT", "");
  }
  return c;
}

}  // namespace mci
