#include "backends/gloo/gloo_sends.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::gloo_backend {

namespace {

std::chrono::milliseconds left_until(Clock::time_point t) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now());
  // Gloo treats its timeout as a wait budget; 1ms still ends in a timeout.
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

PendingSends::PendingSends(std::shared_ptr<::gloo::Context> context, std::size_t max_bytes)
    : context_(std::move(context)), max_bytes_(max_bytes) {}

PendingSends::~PendingSends() { drop(); }

void PendingSends::post(int peer, std::uint64_t slot, const void* data, std::size_t bytes,
                        std::chrono::milliseconds budget, const Deadline& dl, std::string what) {
  {
    std::unique_lock lk(mu_);
    // One send may always be in flight, however large; beyond that the
    // caller waits for receivers instead of holding unbounded copies.
    const bool room =
        cv_.wait_until(lk, dl.at(), [&] { return failure_ || queue_.empty() || pending_bytes_ + bytes <= max_bytes_; });
    if (!room) {
      throw TimeoutError(
          fmt::format("Timed out waiting {}ms to post {}: {} earlier sends ({} bytes) are still waiting for "
                      "their receivers to post the matching recv (the gloo backend holds at most {} bytes of "
                      "unreceived sends). Check that every send has a matching recv.",
                      dl.budget().count(), what, queue_.size(), pending_bytes_, max_bytes_));
    }
  }

  Pending p;
  // No zero fill: every byte is overwritten at once.
  p.copy = std::make_unique_for_overwrite<std::uint8_t[]>(std::max<std::size_t>(bytes, 1));
  if (bytes > 0) std::memcpy(p.copy.get(), data, bytes);
  p.buf = context_->createUnboundBuffer(p.copy.get(), bytes);
  p.bytes = bytes;
  p.budget = budget;
  p.deadline = Clock::now() + budget;
  p.peer = peer;
  p.what = std::move(what);
  // Posting only announces the send; the bytes move once the peer's recv
  // for this slot arrives, on Gloo's device thread.
  p.buf->send(peer, slot);

  std::lock_guard lk(mu_);
  pending_bytes_ += bytes;
  queue_.push_back(std::move(p));
  if (!reaper_.joinable()) reaper_ = std::thread([this] { reap(); });
  cv_.notify_all();
}

void PendingSends::reap() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !failure_); });
    if (stop_) return;
    Pending& p = queue_.front();
    lk.unlock();
    bool done = false;
    std::exception_ptr error;
    try {
      // A timeout here makes Gloo close every pair of the context, so the
      // peers hear of it too; the next call on this rank reports it.
      done = p.buf->waitSend(left_until(p.deadline));
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    if (error) {
      failure_ = Failure{error, p.what, p.peer, p.budget};
      cv_.notify_all();
      continue;
    }
    if (!done) continue;  // woken by drop(); the loop sees stop_
    pending_bytes_ -= p.bytes;
    queue_.pop_front();
    cv_.notify_all();
  }
}

std::optional<PendingSends::Failure> PendingSends::failure() const {
  std::lock_guard lk(mu_);
  return failure_;
}

bool PendingSends::flush(const Deadline& dl) {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, dl.at(), [&] { return queue_.empty() || failure_.has_value(); });
  return queue_.empty();
}

std::size_t PendingSends::pending() const {
  std::lock_guard lk(mu_);
  return queue_.size();
}

void PendingSends::drop() noexcept {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    // The reaper only ever waits on the front send; this wakes it (or makes
    // its next wait return at once if it is just about to start it).
    if (reaper_.joinable() && !queue_.empty()) queue_.front().buf->abortWaitSend();
  }
  cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  std::lock_guard lk(mu_);
  queue_.clear();
  pending_bytes_ = 0;
}

}  // namespace mci::gloo_backend
