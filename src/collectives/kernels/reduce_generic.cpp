// Baseline instruction set (SSE2 on x86-64).
#define MCI_KERNEL_NS generic
#include "collectives/kernels/reduce.hpp"
#include "collectives/kernels/reduce_impl.hpp"

namespace mci::coll {
void reduce_to_generic(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op) {
  generic::reduce_to(out, a, b, n, t, op);
}
void fold_16bit_generic(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op) {
  generic::fold_16bit(dst, src, n, count, t, op);
}
}  // namespace mci::coll
