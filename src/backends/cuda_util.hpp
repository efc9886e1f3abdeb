// Small CUDA runtime helpers shared by the nccl backend, device staging in
// the cpu backend and CUDA-event timing. Only compiled with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
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

// CUDA memory grown on demand: pinned host memory or device memory.
template <cudaError_t (*Alloc)(void**, std::size_t), cudaError_t (*Free)(void*)>
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() {
    if (p_) Free(p_);
  }
  void* get(std::size_t bytes) {
    if (bytes > size_ || !p_) {
      if (p_) Free(p_);
      p_ = nullptr;
      size_ = 0;
      check(Alloc(&p_, std::max<std::size_t>(bytes, 256)), "allocating CUDA memory");
      size_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

inline cudaError_t alloc_host(void** p, std::size_t n) { return cudaMallocHost(p, n); }
inline cudaError_t alloc_device(void** p, std::size_t n) { return cudaMalloc(p, n); }
using PinnedBuffer = GrowingBuffer<alloc_host, cudaFreeHost>;
using DeviceBuffer = GrowingBuffer<alloc_device, cudaFree>;

class Event {
 public:
  Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
  explicit Event(unsigned flags) { check(cudaEventCreateWithFlags(&e_, flags), "cudaEventCreateWithFlags"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_{};
};

}  // namespace mci::cuda
