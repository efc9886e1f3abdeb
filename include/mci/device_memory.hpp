// Memory on a device, for programs that need a buffer where a collective
// runs (tools, tests, examples): host memory, or CUDA device memory in a
// build with CUDA (ConfigError otherwise).
#pragma once

#include <cstddef>
#include <memory>

#include "mci/types.hpp"

namespace mci {

class DeviceMemory {
 public:
  DeviceMemory(Device where, std::size_t bytes);  // zero-filled
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // Copies between this memory (at byte `offset`) and host memory.
  void copy_from_host(const void* src, std::size_t bytes, std::size_t offset = 0);
  void copy_to_host(void* dst, std::size_t bytes, std::size_t offset = 0) const;

 private:
  Device device_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace mci
