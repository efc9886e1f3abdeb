// The communication hooks: how one bucket is averaged across ranks.
#include <memory>
#include <vector>

#include "mci/ddp.hpp"

namespace mci {

CommHook allreduce_hook() {
  return [](ProcessGroup& pg, BufferView bucket) -> BucketCompletion {
    Work w = pg.all_reduce(bucket, ReduceOp::avg, Exec::async);
    return [w] { w.wait(); };
  };
}

// PyTorch's bf16_compress_hook: half the bytes on the wire for f32
// gradients, at bf16's precision (8 bits of mantissa) for the average.
CommHook bf16_compress_hook() {
  return [](ProcessGroup& pg, BufferView bucket) -> BucketCompletion {
    if (bucket.dtype != DType::f32 || bucket.device.is_cuda()) return allreduce_hook()(pg, bucket);
    auto packed = std::make_shared<std::vector<BFloat16>>(bucket.count);
    const float* src = static_cast<const float*>(bucket.data);
    for (std::size_t i = 0; i < bucket.count; ++i) (*packed)[i] = to_bfloat16(src[i]);
    Work w = pg.all_reduce(view(*packed), ReduceOp::avg, Exec::async);
    return [w, packed, bucket] {
      w.wait();
      float* dst = static_cast<float*>(bucket.data);
      for (std::size_t i = 0; i < bucket.count; ++i) dst[i] = to_float((*packed)[i]);
    };
  };
}

}  // namespace mci
