// Where a process of a job learns its place (env://): RANK, WORLD_SIZE,
// MCI_STORE_ADDR/MCI_STORE_PORT (mcirun's store), MASTER_ADDR and MASTER_PORT when set, else what the launcher that
// started it set: Slurm (srun), Open MPI (mpirun), PMIx or MPICH/Hydra. Precedence, per value: the variable itself,
// then the MPI launcher that started the process (Open MPI, MPICH, PMIx: mpirun inside a Slurm allocation runs its
// daemons as Slurm steps, so Slurm's numbers there are the daemons'), then a
// Slurm job step. docs/env.md has the table.
#pragma once

#include <string>

#include "common/env_lookup.hpp"
#include "common/rank_variables.hpp"

namespace mci {

struct JobCoordinates {
  int rank = -1;
  int world = -1;
  int local_rank = 0;
  int local_world = 1;
  std::string host;  // where the job's store listens
  int port = 0;
  std::string source;  // "RANK/WORLD_SIZE", "Slurm", "Open MPI", ... for messages
};

// Slurm's derived store port: every rank of a job step computes the same
// one, different for each step of the job.
int slurm_store_port(long long job_id, long long step_id);
inline constexpr int kDerivedPortBase = 20000;
inline constexpr int kDerivedPortSpan = 10000;

// MASTER_PORT (or `name`) as a TCP port, or ConfigError naming `where` (the
// init method).
int checked_port(long long port, const std::string& where, const char* name = "MASTER_PORT");

// Whether any source of a rank is present (RANK, or a launcher's rank
// variable); says nothing about whether the rest is complete.
bool has_job_variables(const EnvLookup& env);

// Throws ConfigError naming the variables that are missing, malformed or in
// disagreement, and what to set.
JobCoordinates job_coordinates(const EnvLookup& env);

}  // namespace mci
