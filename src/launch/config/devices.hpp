// What --nproc_per_node=cpu|gpu|auto count.
#pragma once

#include <string>

#include "common/env_lookup.hpp"

namespace mci::launch {

// CPUs this process may run on (its affinity mask, which Slurm and
// containers narrow), at least 1.
int usable_cpus();

// GPUs a CUDA program started from here would see: CUDA_VISIBLE_DEVICES
// when set (entries up to the first invalid one, as CUDA reads it; empty
// means none), else the /dev/nvidiaN device files under dev_dir.
int visible_gpus(const EnvLookup& env, const std::string& dev_dir = "/dev");

}  // namespace mci::launch
