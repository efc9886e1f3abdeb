// CPUs for wait policies: spinning pays off only while every waiting rank
// has a core. Ranks pinned one core each see one CPU in their own affinity
// mask, so a machine's ranks pool their masks.
#pragma once

#include <string>
#include <vector>

namespace mci {

// How many CPUs this process may run on (its affinity mask).
int online_cpus();
// The CPUs this process may run on, in order.
std::vector<int> affinity_cpus();
// This process's affinity mask, as text to publish.
std::string affinity_mask_text();
// How many CPUs the union of published masks covers (0 if none parse).
int cpus_in_union(const std::vector<std::string>& masks);

}  // namespace mci
