// A transport between threads of one process, so algorithms can be tested
// without processes or sockets (and seen whole by the sanitizers). It keeps
// TcpTransport's contract: posted operations move only inside wait,
// wait_all and progress; frames between two ranks are matched in posting
// order per direction (p2p frames by tag); fingerprints and sizes are
// checked on receipt; deadlines, aborts and departures fail a wait the same
// way. A send completes once its bytes are copied into the hub, before the
// receive is posted, as a socket buffer would let it.
//
// A hub made with a window instead holds at most that many bytes in flight
// per direction, as a small socket buffer does: a send's bytes leave the
// caller's buffer a window at a time, as the receiver drains them, so a
// send can still be incomplete when the receive beside it is done. That is
// what TCP does while its buffers are small (a job's first large calls over
// a real link), and what an algorithm that reuses a buffer it sent from
// must wait for (issue 49).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace mci::transport {

// What the ranks share: the frames in flight between every ordered pair,
// and which ranks left or aborted. One per in-process job.
class LoopbackHub {
 public:
  // window_bytes: 0 for unbounded (a send completes in one round).
  explicit LoopbackHub(int size, std::size_t window_bytes = 0);
  int size() const { return size_; }

 private:
  friend class LoopbackTransport;
  // A whole frame, or (with a window) a part of one: `total` is the
  // frame's size, and a part that `continues` extends the frame before it.
  struct Frame {
    Fingerprint fp;
    std::vector<std::uint8_t> bytes;
    std::size_t total = 0;
    bool continues = false;
  };
  struct RankState {
    bool left = false;
    std::optional<std::string> abort_reason;
  };
  std::deque<Frame>& channel(int from, int to) { return channels_[static_cast<std::size_t>(from * size_ + to)]; }

  const int size_;
  const std::size_t window_;
  std::mutex mu_;
  std::condition_variable changed_;
  // Bumped (under mu_) by every send, abort and close: a waiter that saw
  // generation g sleeps until it differs, so no wake-up is lost between
  // looking at the hub and going to sleep.
  std::uint64_t generation_ = 0;
  std::vector<std::deque<Frame>> channels_;  // [from * size + to]
  std::vector<std::size_t> in_flight_;       // bytes in each channel (window mode)
  std::vector<RankState> ranks_;
};

// One rank's end. Used by one thread at a time, like TcpTransport; ranks on
// different threads share the hub.
class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank);
  ~LoopbackTransport() override;
  LoopbackTransport(const LoopbackTransport&) = delete;
  LoopbackTransport& operator=(const LoopbackTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  const char* name() const override { return "loopback"; }

  OpHandle post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) override;
  OpHandle post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) override;
  void wait(const OpHandle& op, const Deadline& dl) override;
  void wait_all(const Deadline& dl) override;
  bool done(const OpHandle& op) const override;
  void progress(std::chrono::milliseconds max_wait, const Deadline& dl) override;
  void reap() override;
  void abort(const std::string& reason) noexcept override;
  void close() noexcept override;

 private:
  struct SendOp {
    Fingerprint fp;
    const std::uint8_t* data = nullptr;
    std::size_t bytes = 0;
  };
  struct RecvOp {
    Fingerprint fp;
    std::uint8_t* data = nullptr;
    std::size_t bytes = 0;
    bool done = false;
  };
  struct Peer {
    std::deque<SendOp> sends;
    std::size_t front_sent = 0;  // bytes of sends.front() already in the hub (window mode)
    std::uint64_t sends_posted = 0;
    std::uint64_t sends_done = 0;
    std::deque<RecvOp> recvs;
    std::uint64_t recv_base = 0;  // index of recvs.front() among all recvs posted
    std::size_t recvs_left = 0;
    std::deque<LoopbackHub::Frame> inbox;  // arrived, no recv has taken them yet
    // The hub's word on this peer, as of the last step.
    bool left = false;
    std::optional<std::string> abort_reason;
  };

  template <class Done>
  void progress_until(Done done, const Deadline& dl);
  // One round: hands posted sends to the hub, takes what has arrived and
  // matches it; throws if work is pending on a peer that is gone. Returns
  // the hub generation this round saw.
  // `enough`: what the caller waits for; once it holds, a windowed step
  // pushes no more of our sends.
  std::uint64_t step(const std::function<bool()>& enough = {});
  // step()'s exchanges with the hub, under its lock; true if anything moved.
  bool exchange_whole(std::vector<std::vector<LoopbackHub::Frame>>& outgoing);
  bool drain_windowed();
  bool push_windowed();
  void match(int peer);
  void check_peers();
  bool pending() const;
  // Sleeps until the hub changes from generation `seen` or `until` passes.
  void sleep(std::uint64_t seen, Clock::time_point until);
  void check_usable() const;
  // Every error leaves the transport unusable, as TcpTransport's do.
  template <class E>
  [[noreturn]] void fail(const E& e);
  [[noreturn]] void timeout(const Deadline& dl);

  std::shared_ptr<LoopbackHub> hub_;
  int rank_;
  std::vector<Peer> peers_;
  bool broken_ = false;  // after an error, an abort or close: unusable
};

}  // namespace mci::transport
