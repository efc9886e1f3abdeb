#include "launch/scheduler.hpp"

#include <fmt/format.h>

#include "common/env.hpp"
#include "common/hostlist.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

namespace {

std::optional<long long> number(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v) return std::nullopt;
  auto n = parse_int(*v);
  if (!n || *n < 0 || *n > (1 << 20)) {
    throw ConfigError(
        fmt::format("{} is '{}', not a count mcirun can use: is this really a "
                    "Slurm or Open MPI environment?",
                    name, *v));
  }
  return n;
}

std::optional<long long> first_number(const EnvLookup& env, const char* a, const char* b) {
  auto v = number(env, a);
  return v ? v : number(env, b);
}

std::optional<SchedulerPlacement> from_slurm(const EnvLookup& env) {
  if (!env("SLURM_STEP_ID") && !env("SLURM_STEPID")) return std::nullopt;
  auto node_id = number(env, "SLURM_NODEID");
  auto nodes = first_number(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES");
  if (!node_id || !nodes) return std::nullopt;
  SchedulerPlacement p;
  p.source = "srun";
  p.nnodes = static_cast<int>(*nodes);
  p.node_rank = static_cast<int>(*node_id);
  if (auto tasks = first_number(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"); tasks && *tasks != *nodes) {
    throw ConfigError(
        fmt::format("this srun step runs {} tasks on {} node(s), but mcirun must run once per node (it starts "
                    "the processes of its node itself): use 'srun --nodes={} --ntasks-per-node=1 mcirun "
                    "--nproc_per_node=N ...', or pass --nnodes and --node_rank yourself",
                    *tasks, *nodes, *nodes));
  }
  if (p.node_rank >= p.nnodes) {
    throw ConfigError(
        fmt::format("SLURM_NODEID={} is not below the step's {} node(s); pass "
                    "--nnodes and --node_rank yourself",
                    p.node_rank, p.nnodes));
  }
  for (const char* list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto v = env(list); v && !v->empty()) {
      p.master_addr = first_host(*v);
      break;
    }
  }
  return p;
}

std::optional<SchedulerPlacement> from_open_mpi(const EnvLookup& env) {
  auto size = number(env, "OMPI_COMM_WORLD_SIZE");
  auto rank = number(env, "OMPI_COMM_WORLD_RANK");
  if (!size || !rank) return std::nullopt;
  if (auto local = number(env, "OMPI_COMM_WORLD_LOCAL_SIZE"); local && *local != 1) {
    throw ConfigError(
        fmt::format("mpirun started {} copies of mcirun on this node, but mcirun must run once per node (it "
                    "starts the processes of its node itself): use 'mpirun --map-by ppr:1:node mcirun "
                    "--nproc_per_node=N ...', or pass --nnodes and --node_rank yourself",
                    *local));
  }
  if (*rank >= *size) {
    throw ConfigError(fmt::format("OMPI_COMM_WORLD_RANK={} is not below OMPI_COMM_WORLD_SIZE={}", *rank, *size));
  }
  SchedulerPlacement p;
  p.source = "mpirun";
  p.nnodes = static_cast<int>(*size);
  p.node_rank = static_cast<int>(*rank);
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
