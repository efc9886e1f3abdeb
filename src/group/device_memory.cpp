#include "mci/device_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "mci/errors.hpp"

#ifdef MCI_HAVE_CUDA
#include "backends/cuda_util.hpp"
#endif

namespace mci {

namespace {
constexpr std::size_t kAlign = 64;  // cache lines; what streaming stores want
}

DeviceMemory::DeviceMemory(Device where, std::size_t bytes) : device_(where), bytes_(bytes) {
  const std::size_t rounded = std::max<std::size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (!where.is_cuda()) {
    data_ = std::aligned_alloc(kAlign, rounded);
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, rounded);
    return;
  }
#ifdef MCI_HAVE_CUDA
  const int visible = cuda::device_count();
  if (where.index < 0 || where.index >= visible) {
    throw ConfigError(
        fmt::format("memory on {} needs that GPU, and this process sees {} GPU(s) (check "
                    "CUDA_VISIBLE_DEVICES and the NVIDIA driver)",
                    where.str(), visible));
  }
  cuda::check(cudaSetDevice(where.index), "cudaSetDevice");
  cuda::check(cudaMalloc(&data_, rounded), "cudaMalloc");
  cuda::check(cudaMemset(data_, 0, rounded), "cudaMemset");
#else
  throw ConfigError(fmt::format("memory on {} needs a build of mci with CUDA; this one has none", where.str()));
#endif
}

DeviceMemory::~DeviceMemory() {
  if (!device_.is_cuda()) {
    std::free(data_);
    return;
  }
#ifdef MCI_HAVE_CUDA
  cudaFree(data_);
#endif
}

void DeviceMemory::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  if (offset + bytes > bytes_) throw ConfigError("DeviceMemory::copy_from_host: past the end of the memory");
  auto* dst = static_cast<std::uint8_t*>(data_) + offset;
  if (!device_.is_cuda()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef MCI_HAVE_CUDA
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
#endif
}

void DeviceMemory::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  if (offset + bytes > bytes_) throw ConfigError("DeviceMemory::copy_to_host: past the end of the memory");
  const auto* src = static_cast<const std::uint8_t*>(data_) + offset;
  if (!device_.is_cuda()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef MCI_HAVE_CUDA
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
#endif
}

}  // namespace mci
