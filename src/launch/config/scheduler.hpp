// Where this node sits in the job when mcirun itself was started by a
// scheduler, one mcirun per node: srun (Slurm) or mpirun (Open MPI).
#pragma once

#include <optional>
#include <string>

#include "common/env_lookup.hpp"

namespace mci::launch {

struct SchedulerPlacement {
  std::string source;  // "srun" or "mpirun", for messages
  int nnodes = 1;
  int node_rank = 0;
  // The first node of the step (Slurm); Open MPI does not name it.
  std::optional<std::string> master_addr;
};

// Slurm: inside a job step (SLURM_STEP_ID and SLURM_NODEID set), nnodes is
// the step's node count (SLURM_STEP_NUM_NODES, else SLURM_NNODES), node_rank
// is SLURM_NODEID and node 0 is the first host of SLURM_STEP_NODELIST (else
// SLURM_JOB_NODELIST). A batch script outside srun is a one-node step.
// Open MPI: OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK, with
// OMPI_COMM_WORLD_LOCAL_SIZE=1.
// Either must run exactly one mcirun per node: anything else throws
// ConfigError saying how to launch it. nullopt when neither is present.
std::optional<SchedulerPlacement> scheduler_placement(const EnvLookup& env);

}  // namespace mci::launch
