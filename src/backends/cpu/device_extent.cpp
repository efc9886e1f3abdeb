#include "backends/cpu/device_staging.hpp"

namespace mci {

Extent extent(const coll::CollectiveDesc& d, int rank, int size) {
  const std::size_t b = d.bytes(), all = b * static_cast<std::size_t>(size);
  const bool root = rank == d.root;
  switch (d.kind) {
    case OpKind::all_reduce: return {b, b};
    case OpKind::broadcast: return {root ? b : 0, b};
    case OpKind::reduce: return {b, root ? b : 0};
    case OpKind::all_gather: return {b, all};
    case OpKind::gather: return {b, root ? all : 0};
    case OpKind::scatter: return {root ? all : 0, b};
    case OpKind::reduce_scatter: return {all, b};
    case OpKind::all_to_all: return {all, all};
    case OpKind::barrier: return {0, 0};
    case OpKind::send: return {b, 0};
    case OpKind::recv: return {0, b};
  }
  return {};
}

}  // namespace mci
