// Where a process's rank may be found, in the order env:// prefers them
// (group/job_coordinates.hpp); log lines use the first set one before the
// group exists.
#pragma once

namespace mci {

inline constexpr const char* kRankVariables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                                 "SLURM_PROCID"};

}  // namespace mci
