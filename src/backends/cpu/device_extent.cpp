#include "backends/cpu/device_staging.hpp"

namespace mci {

Extent extent(const coll::CollectiveDesc& d, int rank, int size) {
  const OpShape& shape = op_shape(d.kind);
  const bool root = rank == d.root;
  const std::size_t b = d.bytes(), n = static_cast<std::size_t>(size);
  return {side_count(shape.in, shape.in_at_root_only, root, b, n),
          side_count(shape.out, shape.out_at_root_only, root, b, n)};
}

}  // namespace mci
