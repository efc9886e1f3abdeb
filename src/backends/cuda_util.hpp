// Small CUDA runtime helpers shared by the nccl backend, device staging in
// the cpu backend and CUDA-event timing. Only compiled with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw Error(fmt::format("CUDA error in {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
  }
}

// The number of devices this process sees; 0 when there is no driver or GPU.
inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

// Pinned host memory, grown on demand.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  void* get(std::size_t bytes) {
    if (bytes > size_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      size_ = 0;
      check(cudaMallocHost(&p_, bytes), "cudaMallocHost");
      size_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

class Event {
 public:
  Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_{};
};

}  // namespace mci::cuda
