// The variables Slurm and Open MPI set, read in one place for the two that
// need them: env:// (a rank's place, group/job_coordinates.cpp) and mcirun
// started by srun or mpirun (its node's place, launch/config/scheduler.cpp). Which
// variable holds what, and which one stands in for another (SLURM_STEPID
// for SLURM_STEP_ID, SLURM_NNODES for SLURM_STEP_NUM_NODES, ...), is said
// here only. Each caller passes how it reads a number, so its messages say
// who was reading and what to do.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/env_lookup.hpp"

namespace mci {

// A number from a variable: nullopt when unset; throws ConfigError (in the
// caller's words) when malformed.
using NumberReader = std::function<std::optional<long long>(const char* name)>;

struct SlurmVars {
  std::optional<long long> step_id;  // SLURM_STEP_ID, else SLURM_STEPID: set inside a job step (srun)
  std::optional<long long> procid;   // SLURM_PROCID: this task's rank in the step
  std::optional<long long> ntasks;   // SLURM_STEP_NUM_TASKS, else SLURM_NTASKS
  const char* ntasks_var = "SLURM_NTASKS";
  std::optional<long long> nnodes;            // SLURM_STEP_NUM_NODES, else SLURM_NNODES
  std::optional<long long> node_id;           // SLURM_NODEID
  std::optional<long long> local_id;          // SLURM_LOCALID
  std::optional<long long> job_id;            // SLURM_JOB_ID, else SLURM_JOBID
  std::optional<std::string> tasks_per_node;  // SLURM_STEP_TASKS_PER_NODE, e.g. "2(x3),1"
  std::string nodelist;  // SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else SLURM_NODELIST ("" when none)

  bool in_step() const { return step_id.has_value(); }
  // An sbatch script's batch shell: a task id without a step, not a rank.
  bool batch_shell() const { return procid && !step_id; }
};
// nullopt when no Slurm task or step variable is set.
std::optional<SlurmVars> slurm_vars(const EnvLookup& env, const NumberReader& number);

struct OpenMpiVars {
  std::optional<long long> rank;        // OMPI_COMM_WORLD_RANK
  std::optional<long long> size;        // OMPI_COMM_WORLD_SIZE
  std::optional<long long> local_rank;  // OMPI_COMM_WORLD_LOCAL_RANK
  std::optional<long long> local_size;  // OMPI_COMM_WORLD_LOCAL_SIZE
};
inline constexpr const char* kOpenMpiRank = "OMPI_COMM_WORLD_RANK";
inline constexpr const char* kOpenMpiSize = "OMPI_COMM_WORLD_SIZE";
inline constexpr const char* kOpenMpiLocalRank = "OMPI_COMM_WORLD_LOCAL_RANK";
inline constexpr const char* kOpenMpiLocalSize = "OMPI_COMM_WORLD_LOCAL_SIZE";
OpenMpiVars open_mpi_vars(const NumberReader& number);

}  // namespace mci
