#include "jobview/bandwidth.hpp"

#include "common/op_kind.hpp"

namespace mci::jobview {

double bus_bandwidth_gbs(const std::string& kind, int ranks, std::uint64_t bytes, double seconds) {
  const auto k = op_kind_named(kind);
  if (!k || seconds <= 0) return 0;
  return static_cast<double>(bytes) / 1e9 / seconds * bus_factor(*k, ranks);
}

}  // namespace mci::jobview
