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

}  // namespace mci::coll
