// The check every DDP runs at construction: all ranks wrap the same model
// (same parameters in the same order, with the same names, sizes and
// dtypes), or the bucketed all-reduces would pair unrelated gradients.
#pragma once

#include <vector>

#include "ddp/param_info.hpp"
#include "mci/process_group.hpp"

namespace mci::ddp {

// Collective. Throws MismatchError naming the first parameter that differs
// (on every rank, each naming its own view of it).
void check_same_model(ProcessGroup& pg, const std::vector<ParamInfo>& params);

}  // namespace mci::ddp
