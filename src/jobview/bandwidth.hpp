// Bus bandwidth as nccl-tests defines it, for an operation named as the
// status blocks name it.
#pragma once

#include <cstdint>
#include <string>

namespace mci::jobview {

// GB/s; 0 for an unknown kind, a barrier or a zero time.
double bus_bandwidth_gbs(const std::string& kind, int ranks, std::uint64_t bytes, double seconds);

}  // namespace mci::jobview
