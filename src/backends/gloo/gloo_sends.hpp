// Point-to-point sends over Gloo that complete when posted, as they do on
// mci's own transport.
//
// Gloo sends an unbound buffer by rendezvous: the bytes leave only once the
// receiver has posted a recv for that slot. A send that waited for that would
// deadlock two ranks that post tags in different orders (rank 0 sends tags
// 1, 2, 3; rank 1 receives 3, 1, 2). So each send is copied, posted, and a
// reaper thread waits for the receivers and frees the copies. The caller only
// waits when more than `max_bytes` are still unreceived (flow control), and
// every wait is bounded by the send's deadline.
#pragma once

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

class PendingSends {
 public:
  // A send that failed after its caller returned: Gloo's exception and what
  // the send was, for the next call to report.
  struct Failure {
    std::exception_ptr error;
    std::string what;  // "send tag 7 (f32 x 8) to rank 1"
    int peer = -1;
    std::chrono::milliseconds budget{};
  };

  PendingSends(std::shared_ptr<::gloo::Context> context, std::size_t max_bytes);
  ~PendingSends();
  PendingSends(const PendingSends&) = delete;
  PendingSends& operator=(const PendingSends&) = delete;

  // Copies `bytes` from `data` and posts the send to `peer` on `slot`. The
  // receiver has until now + `budget` to post its recv. Waits (at most until
  // `dl`) only while too many bytes are unreceived; throws TimeoutError then.
  void post(int peer, std::uint64_t slot, const void* data, std::size_t bytes, std::chrono::milliseconds budget,
            const Deadline& dl, std::string what);
  // The first send that failed, if any.
  std::optional<Failure> failure() const;
  // Waits until every posted send has been received, at most until `dl`.
  // False if some were not (time ran out, or a send failed).
  bool flush(const Deadline& dl);
  // Stops waiting and frees every copy; unreceived sends are lost.
  void drop() noexcept;
  std::size_t pending() const;

 private:
  struct Pending {
    std::unique_ptr<std::uint8_t[]> copy;
    std::unique_ptr<::gloo::transport::UnboundBuffer> buf;
    std::size_t bytes = 0;
    Clock::time_point deadline;
    std::chrono::milliseconds budget{};
    int peer = -1;
    std::string what;
  };

  void reap();

  std::shared_ptr<::gloo::Context> context_;
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Only the reaper pops; a deque keeps references to the front valid while
  // the caller pushes behind it.
  std::deque<Pending> queue_;
  std::size_t pending_bytes_ = 0;
  std::optional<Failure> failure_;
  bool stop_ = false;
  std::thread reaper_;  // started by the first send
};

}  // namespace mci::gloo_backend
