// Point-to-point receives over Gloo that progress beside the sends posted
// after them.
//
// Gloo's only way to learn that a receive completed is to wait for it, and a
// wait that times out breaks the whole context. So a receive is posted to
// Gloo at once and a waiter thread waits for the posted ones, oldest first,
// each until its own deadline; the front end polls done() and wait_any()
// in short rounds, so an async send posted after an async recv (to the same
// peer, whose own recv waits for it) still gets posted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "common/deadline.hpp"

namespace mci::gloo_backend {

class PostedRecvs {
 public:
  // A receive that failed (Gloo's exception), and what it was.
  struct Failure {
    std::exception_ptr error;
    std::string what;  // "recv tag 7 (f32 x 8) from rank 1"
    std::chrono::milliseconds budget{};
  };

  explicit PostedRecvs(std::shared_ptr<::gloo::Context> context);
  ~PostedRecvs();
  PostedRecvs(const PostedRecvs&) = delete;
  PostedRecvs& operator=(const PostedRecvs&) = delete;

  // Posts a receive of `bytes` into `out` from `peer` on `slot`, which has
  // until `dl` to complete; returns its ticket (never 0).
  std::uint64_t post(void* out, std::size_t bytes, int peer, std::uint64_t slot, const Deadline& dl, std::string what);
  // Whether the receive of `ticket` completed (true for a ticket not posted here).
  bool done(std::uint64_t ticket) const;
  // Waits at most `max_wait` for one more receive to complete. Rethrows
  // Gloo's exception when a receive failed (every later call does too).
  void wait_any(std::chrono::milliseconds max_wait);
  std::optional<Failure> failure() const;
  // Stops waiting and forgets every receive; their buffers are released.
  void drop() noexcept;

 private:
  struct Posted {
    std::uint64_t ticket;
    std::unique_ptr<::gloo::transport::UnboundBuffer> buf;
    Clock::time_point deadline;
    std::chrono::milliseconds budget{};
    std::string what;
  };

  void wait_loop();

  std::shared_ptr<::gloo::Context> context_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Only the waiter pops; a deque keeps the front valid while post() pushes.
  std::deque<Posted> queue_;
  std::uint64_t next_ticket_ = 1;
  std::uint64_t completed_ = 0;  // how many completed: wait_any() waits for it to move
  std::optional<Failure> failure_;
  bool stop_ = false;
  std::thread waiter_;  // started by the first receive
};

}  // namespace mci::gloo_backend
