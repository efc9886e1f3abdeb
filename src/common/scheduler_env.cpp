#include "common/scheduler_env.hpp"

namespace mci {

namespace {

std::optional<long long> first_of(const NumberReader& number, const char* a, const char* b) {
  auto v = number(a);
  return v ? v : number(b);
}

}  // namespace

std::optional<SlurmVars> slurm_vars(const EnvLookup& env, const NumberReader& number) {
  SlurmVars s;
  s.procid = number("SLURM_PROCID");
  s.step_id = first_of(number, "SLURM_STEP_ID", "SLURM_STEPID");
  if (!s.procid && !s.step_id) return std::nullopt;
  s.ntasks_var = env("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  s.ntasks = number(s.ntasks_var);
  s.nnodes = first_of(number, "SLURM_STEP_NUM_NODES", "SLURM_NNODES");
  s.node_id = number("SLURM_NODEID");
  s.local_id = number("SLURM_LOCALID");
  s.job_id = first_of(number, "SLURM_JOB_ID", "SLURM_JOBID");
  s.tasks_per_node = env("SLURM_STEP_TASKS_PER_NODE");
  for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto l = env(v); l && !l->empty()) {
      s.nodelist = *l;
      break;
    }
  }
  return s;
}

OpenMpiVars open_mpi_vars(const NumberReader& number) {
  return OpenMpiVars{number(kOpenMpiRank), number(kOpenMpiSize), number(kOpenMpiLocalRank), number(kOpenMpiLocalSize)};
}

}  // namespace mci
