#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cpu/device_staging.hpp"
#include "backends/cuda_util.hpp"

namespace mci {

struct DeviceStaging::Impl {
  cuda::PinnedBuffer in, out;
  void* host_in = nullptr;
  void* host_out = nullptr;
};

DeviceStaging::DeviceStaging() : impl_(std::make_unique<Impl>()) {}
DeviceStaging::~DeviceStaging() = default;

coll::CollectiveDesc DeviceStaging::stage_in(const coll::CollectiveDesc& d, int rank, int size) {
  const Extent e = extent(d, rank, size);
  coll::CollectiveDesc h = d;
  h.device = Device::cpu();
  auto* out = static_cast<std::uint8_t*>(impl_->out.get(std::max<std::size_t>(e.out, 1)));
  const auto* din = static_cast<const std::uint8_t*>(d.in);
  const auto* dout = static_cast<const std::uint8_t*>(d.out);
  // In-place layouts stay in place on the host.
  if (e.in && e.out && din >= dout && din + e.in <= dout + e.out) {
    h.in = out + (din - dout);
    cuda::check(cudaMemcpy(out, dout, e.out, cudaMemcpyDeviceToHost), "cudaMemcpy (stage in)");
  } else if (e.in) {
    void* in = impl_->in.get(e.in);
    cuda::check(cudaMemcpy(in, d.in, e.in, cudaMemcpyDeviceToHost), "cudaMemcpy (stage in)");
    h.in = in;
  }
  if (e.out && e.in && dout >= din && dout + e.out <= din + e.in && h.in != nullptr && dout != din) {
    h.out = static_cast<std::uint8_t*>(const_cast<void*>(h.in)) + (dout - din);  // out is a slice of in
  } else {
    h.out = out;
  }
  if (!e.in) h.in = nullptr;  // not read on this rank
  impl_->host_out = h.out;
  return h;
}

void DeviceStaging::stage_out(const coll::CollectiveDesc& d, int rank, int size) {
  const Extent e = extent(d, rank, size);
  if (e.out) cuda::check(cudaMemcpy(d.out, impl_->host_out, e.out, cudaMemcpyHostToDevice), "cudaMemcpy (stage out)");
}

}  // namespace mci
