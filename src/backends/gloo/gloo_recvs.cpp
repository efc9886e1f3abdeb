#include "backends/gloo/gloo_recvs.hpp"

#include <algorithm>

namespace mci::gloo_backend {

PostedRecvs::PostedRecvs(std::shared_ptr<::gloo::Context> context) : context_(std::move(context)) {}

PostedRecvs::~PostedRecvs() { drop(); }

std::uint64_t PostedRecvs::post(void* out, std::size_t bytes, int peer, std::uint64_t slot, const Deadline& dl,
                                std::string what) {
  Posted p;
  p.buf = context_->createUnboundBuffer(out, bytes);
  p.deadline = dl.at();
  p.budget = dl.budget();
  p.what = std::move(what);
  p.buf->recv(peer, slot);
  std::lock_guard lk(mu_);
  p.ticket = next_ticket_++;
  const std::uint64_t ticket = p.ticket;
  queue_.push_back(std::move(p));
  if (!waiter_.joinable()) waiter_ = std::thread([this] { wait_loop(); });
  cv_.notify_all();
  return ticket;
}

void PostedRecvs::wait_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !failure_); });
    if (stop_) return;
    Posted& p = queue_.front();
    lk.unlock();
    bool done = false;
    std::exception_ptr error;
    try {
      // Gloo treats its timeout as a wait budget; 1 ms still ends in one.
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(p.deadline - Clock::now());
      done = p.buf->waitRecv(std::max(left, std::chrono::milliseconds(1)));
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    if (error) {
      failure_ = Failure{error, p.what, p.budget};
    } else if (done) {
      queue_.pop_front();
      ++completed_;
    }
    // (!done without an error: woken by drop(); the loop sees stop_.)
    cv_.notify_all();
  }
}

bool PostedRecvs::done(std::uint64_t ticket) const {
  std::lock_guard lk(mu_);
  return std::none_of(queue_.begin(), queue_.end(), [&](const Posted& p) { return p.ticket == ticket; });
}

void PostedRecvs::wait_any(std::chrono::milliseconds max_wait) {
  std::unique_lock lk(mu_);
  const std::uint64_t seen = completed_;
  cv_.wait_for(lk, max_wait, [&] { return failure_ || completed_ != seen || queue_.empty(); });
  if (failure_) std::rethrow_exception(failure_->error);
}

std::optional<PostedRecvs::Failure> PostedRecvs::failure() const {
  std::lock_guard lk(mu_);
  return failure_;
}

void PostedRecvs::drop() noexcept {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    // The waiter only ever waits on the front receive: this wakes it (or
    // makes its next wait return at once).
    if (waiter_.joinable() && !queue_.empty()) queue_.front().buf->abortWaitRecv();
  }
  cv_.notify_all();
  if (waiter_.joinable()) waiter_.join();
  std::lock_guard lk(mu_);
  queue_.clear();
}

}  // namespace mci::gloo_backend
