// The environment each process starts with: mcirun's own, plus the
// variables that place it in the job (what torchrun sets, and mci's own).
#pragma once

#include <string>
#include <vector>

#include "common/env_lookup.hpp"
#include "launch/attempt.hpp"
#include "launch/config/job_config.hpp"

namespace mci::launch {

// MCI_JOB_TOKEN from mcirun's environment when set; otherwise a fresh token
// for a one-node job (every process is ours to tell); otherwise empty: the
// other nodes could not know a token we made up, so a multi-node job without
// one runs unauthenticated.
std::string choose_token(const EnvLookup& env, int nnodes);

// torchrun's rule: OMP_NUM_THREADS=1 when the user left it unset and more
// than one process shares the node, so N processes do not each start one
// OpenMP thread per core.
bool omp_default_needed(const EnvLookup& env, int nproc_per_node);
std::string omp_banner();

// mcirun's environment as "NAME=value" strings.
std::vector<std::string> current_environment();

// Where rank `local_rank`'s TORCHELASTIC_ERROR_FILE is (in the attempt's log
// folder with --log-dir, else under its error_dir).
std::string error_file(const Attempt& a, int local_rank);
// The same for a process of rank `rank` started here as local rank
// `local_rank` (a rank adopted from a lost node is not a.rank_of(local_rank)).
std::string error_file(const Attempt& a, int local_rank, int rank);

// base ("NAME=value" strings) with what torch 2.15's agent gives its
// workers in attempt a (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// GROUP_*, ROLE_*, MASTER_ADDR = a.program_addr (else the store's host),
// MASTER_PORT = a.program_port, TORCHELASTIC_*, TORCH_NCCL_ASYNC_ERROR_HANDLING unless
// inherited, and NCCL_ASYNC_ERROR_HANDLING too for a torch older than 2.2,
// which reads only that name; with --virtual-local-rank, LOCAL_RANK=0 and
// CUDA_VISIBLE_DEVICES = the process's own GPU), mcirun's store (MCI_STORE_ADDR/MCI_STORE_PORT,
// MCI_STORE_HOSTED=1 so rank 0 does not host another), MCI_JOB_TOKEN
// (a.store.token; removed when empty), OMP_NUM_THREADS=1 when set_omp,
// GLOO_SOCKET_IFNAME = a.gloo_ifname unless inherited, MCI_ON_RANK_LOSS
// (stop, continue or replace: --on-rank-loss), no MCI_REPLACEMENT (only a
// replacement has one), and
// python_path (when not empty) in front of PYTHONPATH; replacing any
// inherited values.
std::vector<std::string> child_environment(const std::vector<std::string>& base, const JobConfig& job, const Attempt& a,
                                           int local_rank, bool set_omp, const std::string& python_path = {});

}  // namespace mci::launch
