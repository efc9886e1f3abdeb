#include "launch/config/scheduler.hpp"

#include <fmt/format.h>

#include "common/env.hpp"
#include "common/hostlist.hpp"
#include "common/scheduler_env.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

namespace {

std::optional<long long> number(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v) return std::nullopt;
  auto n = parse_int(*v);
  if (!n || *n < 0) {
    throw ConfigError(
        fmt::format("{} is '{}', not a number mcirun can use: is this really a "
                    "Slurm or Open MPI environment?",
                    name, *v));
  }
  return n;
}

// A count of nodes or tasks: job and step ids are larger, counts are not.
long long count(const char* name, long long n) {
  if (n < 1 || n > (1 << 20)) {
    throw ConfigError(
        fmt::format("{}={} is not a count mcirun can use: is this really a Slurm or Open MPI "
                    "environment?",
                    name, n));
  }
  return n;
}

NumberReader numbers(const EnvLookup& env) {
  return [&env](const char* name) { return number(env, name); };
}

std::optional<SchedulerPlacement> from_slurm(const EnvLookup& env) {
  const auto vars = slurm_vars(env, numbers(env));
  if (!vars || !vars->in_step() || !vars->node_id || !vars->nnodes) return std::nullopt;
  SchedulerPlacement p;
  p.source = "srun";
  p.nnodes = static_cast<int>(count("SLURM_STEP_NUM_NODES", *vars->nnodes));
  p.node_rank = static_cast<int>(*vars->node_id);
  if (vars->ntasks && *vars->ntasks != *vars->nnodes) {
    throw ConfigError(
        fmt::format("this srun step runs {} tasks on {} node(s), but mcirun must run once per node (it starts "
                    "the processes of its node itself): use 'srun --nodes={} --ntasks-per-node=1 mcirun "
                    "--nproc_per_node=N ...', or pass --nnodes and --node_rank yourself",
                    *vars->ntasks, *vars->nnodes, *vars->nnodes));
  }
  if (p.node_rank >= p.nnodes) {
    throw ConfigError(
        fmt::format("SLURM_NODEID={} is not below the step's {} node(s); pass "
                    "--nnodes and --node_rank yourself",
                    p.node_rank, p.nnodes));
  }
  if (!vars->nodelist.empty()) p.master_addr = first_host(vars->nodelist);
  return p;
}

std::optional<SchedulerPlacement> from_open_mpi(const EnvLookup& env) {
  const OpenMpiVars vars = open_mpi_vars(numbers(env));
  if (!vars.size || !vars.rank) return std::nullopt;
  if (vars.local_size && *vars.local_size != 1) {
    throw ConfigError(
        fmt::format("mpirun started {} copies of mcirun on this node, but mcirun must run once per node (it "
                    "starts the processes of its node itself): use 'mpirun --map-by ppr:1:node mcirun "
                    "--nproc_per_node=N ...', or pass --nnodes and --node_rank yourself",
                    *vars.local_size));
  }
  if (*vars.rank >= *vars.size) {
    throw ConfigError(fmt::format("{}={} is not below {}={}", kOpenMpiRank, *vars.rank, kOpenMpiSize, *vars.size));
  }
  SchedulerPlacement p;
  p.source = "mpirun";
  p.nnodes = static_cast<int>(count(kOpenMpiSize, *vars.size));
  p.node_rank = static_cast<int>(*vars.rank);
  return p;
}

// Placement sources, asked in this order; the first that recognises its
// environment wins. To add one: a reader above and a row here.
struct PlacementSource {
  const char* name;
  std::optional<SchedulerPlacement> (*read)(const EnvLookup& env);
};
constexpr PlacementSource kSources[] = {{"slurm", &from_slurm}, {"open_mpi", &from_open_mpi}};

}  // namespace

std::optional<SchedulerPlacement> scheduler_placement(const EnvLookup& env) {
  for (const auto& source : kSources) {
    if (auto p = source.read(env)) return p;
  }
  return std::nullopt;
}

}  // namespace mci::launch
