// Element-wise reduction: dst[i] = dst[i] op src[i]. 16-bit floats are
// widened to f32 for each operation. Average is a sum here; finish_avg()
// divides once at the end.
#pragma once

#include <cstddef>

#include "mci/types.hpp"

namespace mci::coll {

void reduce_into(void* dst, const void* src, std::size_t count, DType t, ReduceOp op);
// out[i] = a[i] op b[i] (out may alias a or b).
void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType t, ReduceOp op);
// Divides by n: integers truncate toward zero, floats round as their type.
void finish_avg(void* data, std::size_t count, DType t, int n);
// "avx2+f16c" or "generic": the loops chosen for this CPU at run time.
const char* reduce_kernel_name();
// The two builds of the loops, for tests that compare them bit for bit.
void reduce_to_generic(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#if defined(__x86_64__)
void reduce_to_avx2(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#endif

}  // namespace mci::coll
