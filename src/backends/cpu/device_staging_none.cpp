// Built without CUDA: device buffers cannot be staged.
#include "backends/cpu/device_staging.hpp"
#include "mci/errors.hpp"

namespace mci {

struct DeviceStaging::Impl {};

DeviceStaging::DeviceStaging() = default;
DeviceStaging::~DeviceStaging() = default;

coll::CollectiveDesc DeviceStaging::stage_in(const coll::CollectiveDesc&, int, int) {
  throw ConfigError(
      "this buffer is on a CUDA device, and this build of mci has no CUDA: pass host memory, or "
      "rebuild mci with the CUDA toolkit");
}

void DeviceStaging::stage_out(const coll::CollectiveDesc&, int, int) {}

}  // namespace mci
