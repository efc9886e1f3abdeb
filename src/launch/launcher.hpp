// mcirun from end to end: command line, job, store, processes, exit code.
// tools/mcirun/main.cpp only calls mcirun_main.
#pragma once

#include <string>
#include <vector>

#include "common/env_lookup.hpp"
#include "launch/config/job_config.hpp"

namespace mci::launch {

// Hosts the store (node 0), starts the node's processes and supervises them
// (job_run.hpp's phases). Returns the exit code; a store that cannot be
// hosted (port in use) is an error line and 1, with no process started.
int run_job(const JobConfig& job, const EnvLookup& env);

// Exit codes: 0 success, 1 a process failed or could not start, 2 a bad
// command line, 128+N stopped by signal N.
int mcirun_main(const std::vector<std::string>& argv);

// `nproc` processes of `command` on this host, as
// mcirun --standalone --nproc_per_node=NPROC COMMAND... runs them (for tools
// that start their own ranks: mci-perf -g N), reading no PET_ variable.
// Same exit codes.
int run_local_job(int nproc, const std::vector<std::string>& command);

}  // namespace mci::launch
