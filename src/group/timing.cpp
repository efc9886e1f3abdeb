// CollectiveTimer: a steady clock for host memory; CUDA events recorded on
// the group's stream for device memory (NCCL returns before the GPU is done).
#include <chrono>

#include "group/group_impl.hpp"
#include "mci/errors.hpp"
#include "mci/timing.hpp"

#ifdef MCI_HAVE_CUDA
#include "backends/cuda_util.hpp"
#endif

namespace mci {

struct CollectiveTimer::Impl {
  std::chrono::steady_clock::time_point t0;
#ifdef MCI_HAVE_CUDA
  cudaStream_t stream = nullptr;
  std::optional<cuda::Event> start, end;
#endif
  bool device = false;
};

CollectiveTimer::CollectiveTimer(ProcessGroup& pg, Device where) : impl_(std::make_unique<Impl>()) {
  if (!where.is_cuda()) return;
#ifdef MCI_HAVE_CUDA
  impl_->device = true;
  impl_->stream = static_cast<cudaStream_t>(pg.impl_->cuda_stream());
  cuda::check(cudaSetDevice(where.index), "cudaSetDevice");
  impl_->start.emplace();
  impl_->end.emplace();
#else
  (void)pg;
  throw ConfigError(
      "timing device memory needs CUDA events, and this build of mci has no CUDA; time host "
      "buffers instead");
#endif
}

CollectiveTimer::~CollectiveTimer() = default;

void CollectiveTimer::start() {
#ifdef MCI_HAVE_CUDA
  if (impl_->device) {
    cuda::check(cudaEventRecord(impl_->start->get(), impl_->stream), "cudaEventRecord");
    return;
  }
#endif
  impl_->t0 = std::chrono::steady_clock::now();
}

double CollectiveTimer::stop_ms() {
#ifdef MCI_HAVE_CUDA
  if (impl_->device) {
    cuda::check(cudaEventRecord(impl_->end->get(), impl_->stream), "cudaEventRecord");
    cuda::check(cudaEventSynchronize(impl_->end->get()), "cudaEventSynchronize");
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, impl_->start->get(), impl_->end->get()), "cudaEventElapsedTime");
    return ms;
  }
#endif
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - impl_->t0).count();
}

int visible_gpu_count() {
#ifdef MCI_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace mci
