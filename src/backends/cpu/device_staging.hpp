// Device memory for the cpu backend: inputs are copied from the GPU to pinned
// host memory, the host algorithm runs, outputs are copied back. This lets a
// single-GPU machine run a multi-rank job on one GPU (NCCL refuses two ranks
// on one device). Without CUDA in the build, device buffers are refused.
#pragma once

#include <memory>

#include "collectives/desc.hpp"

namespace mci {

class DeviceStaging {
 public:
  DeviceStaging();
  ~DeviceStaging();
  // Copies d's device inputs to host memory; returns d with host pointers.
  coll::CollectiveDesc stage_in(const coll::CollectiveDesc& d, int rank, int size);
  // Copies the host results of the staged call back to d's device buffers.
  void stage_out(const coll::CollectiveDesc& d, int rank, int size);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Bytes this rank reads from `in` and writes to `out` for the collective.
struct Extent {
  std::size_t in = 0;
  std::size_t out = 0;
};
Extent extent(const coll::CollectiveDesc& d, int rank, int size);

}  // namespace mci
