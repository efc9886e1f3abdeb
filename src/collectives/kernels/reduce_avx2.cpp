// AVX2 + F16C, used only when the CPU has them (see reduce.cpp).
#define MCI_KERNEL_NS avx2
#define MCI_KERNELS_AVX2
#include "collectives/kernels/reduce_impl.hpp"

namespace mci::coll {
void reduce_to_avx2(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op) {
  avx2::reduce_to(out, a, b, n, t, op);
}
}  // namespace mci::coll
