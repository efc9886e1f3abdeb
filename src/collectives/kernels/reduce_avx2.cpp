// AVX2 + F16C, used only when the CPU has them (see reduce.cpp).
#define MCI_KERNEL_NS avx2
#define MCI_KERNELS_AVX2
#include "collectives/kernels/reduce.hpp"
#include "collectives/kernels/reduce_impl.hpp"

namespace mci::coll {
void reduce_to_avx2(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op) {
  avx2::reduce_to(out, a, b, n, t, op);
}
void fold_16bit_avx2(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op) {
  avx2::fold_16bit(dst, src, n, count, t, op);
}
}  // namespace mci::coll
