// A point on a device queue that completes with one operation (a CUDA event
// recorded after an NCCL call). Work::wait_stream orders a user's stream after
// it, so device work can follow a collective without the host waiting.
#pragma once

#include <functional>
#include <memory>

namespace mci {

class DeviceFence {
 public:
  virtual ~DeviceFence() = default;
  // Makes `stream` (a cudaStream_t; nullptr is the legacy default stream)
  // wait for the operation on the device. Returns at once.
  virtual void order_stream(void* stream) const = 0;
};

// Called by a device backend as soon as an operation is on the device queue.
using FenceSink = std::function<void(std::shared_ptr<const DeviceFence>)>;

}  // namespace mci
