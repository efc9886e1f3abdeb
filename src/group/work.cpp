#include <string>

#include "group/work_state.hpp"

namespace mci {

namespace {
std::shared_ptr<Work::State> completed_noop() {
  auto s = std::make_shared<Work::State>();
  s->done = true;
  return s;
}
}  // namespace

Work::Work() : state_(completed_noop()) {}
Work::Work(std::shared_ptr<State> s) : state_(std::move(s)) {}

void Work::wait() const {
  std::unique_lock lk(state_->mu);
  state_->cv.wait(lk, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

void Work::wait_stream(void* cuda_stream) const {
  std::shared_ptr<const DeviceFence> fence;
  {
    std::unique_lock lk(state_->mu);
    state_->cv.wait(lk, [&] { return state_->done || state_->fence; });
    if (state_->error) std::rethrow_exception(state_->error);
    if (state_->done) return;  // finished on the device too: nothing to order
    fence = state_->fence;
  }
  fence->order_stream(cuda_stream);
}

bool Work::wait_for(std::chrono::milliseconds limit) const {
  std::unique_lock lk(state_->mu);
  return state_->cv.wait_for(lk, limit, [&] { return state_->done; });
}

bool Work::is_completed() const {
  std::lock_guard lk(state_->mu);
  return state_->done;
}

bool Work::is_success() const {
  std::lock_guard lk(state_->mu);
  return state_->done && !state_->error;
}

std::exception_ptr Work::exception() const {
  std::lock_guard lk(state_->mu);
  return state_->error;
}

std::chrono::nanoseconds Work::duration() const {
  std::lock_guard lk(state_->mu);
  return state_->duration;
}

double Work::duration_ms() const { return std::chrono::duration<double, std::milli>(duration()).count(); }

std::uint64_t Work::seq() const { return state_->seq; }
std::string Work::op() const { return std::string(op_name(state_->kind)); }
std::string Work::algorithm() const { return std::string(algo_name(state_->algo)); }

int Work::source() const {
  std::lock_guard lk(state_->mu);
  return state_->done ? state_->source : -1;
}

}  // namespace mci
