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

// Where rank r's values are (count of them), for fold_ranks.
class RankSources {
 public:
  template <class F>
  RankSources(const F& f)  // NOLINT: a view of any callable, as a function_ref
      : obj_(&f), call_([](const void* o, int r) -> const void* { return (*static_cast<const F*>(o))(r); }) {}
  const void* operator()(int r) const { return call_(obj_, r); }

 private:
  const void* obj_;
  const void* (*call_)(const void*, int);
};

// dst = src(0) op src(1) op ... op src(n-1), in rank order (divided by n
// for avg): the one fold every rank-ordered algorithm does, so that they
// give the same bits. 32- and 64-bit types combine in their own type;
// 16-bit floats accumulate in f32 and are rounded once (not once per rank,
// as n-1 reduce_into would). dst may be src(0) or src(1) (any source for
// 16-bit floats).
void fold_ranks(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op);
// The two builds of the 16-bit fold, for tests that compare them.
void fold_16bit_generic(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op);
#if defined(__x86_64__)
void fold_16bit_avx2(void* dst, RankSources src, int n, std::size_t count, DType t, ReduceOp op);
#endif
// "avx2+f16c" or "generic": the loops chosen for this CPU at run time.
const char* reduce_kernel_name();
// The two builds of the loops, for tests that compare them bit for bit.
void reduce_to_generic(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#if defined(__x86_64__)
void reduce_to_avx2(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op);
#endif

}  // namespace mci::coll
