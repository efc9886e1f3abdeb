#include <chrono>

#include "mci/errors.hpp"
#include "mci/timing.hpp"

namespace mci {

struct CollectiveTimer::Impl {
  std::chrono::steady_clock::time_point t0;
};

CollectiveTimer::CollectiveTimer(ProcessGroup&, Device where) : impl_(std::make_unique<Impl>()) {
  if (where.is_cuda()) {
    throw ConfigError("timing device memory needs CUDA events, and this build of mci has no CUDA; "
                      "time host buffers instead");
  }
}

CollectiveTimer::~CollectiveTimer() = default;

void CollectiveTimer::start() { impl_->t0 = std::chrono::steady_clock::now(); }

double CollectiveTimer::stop_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - impl_->t0).count();
}

int visible_gpu_count() { return 0; }

}  // namespace mci
