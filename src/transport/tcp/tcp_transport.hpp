// The TCP transport: one connection per peer it talks to, made at init
// (eager) or when an operation first names the peer (lazy, see
// tcp_links.hpp); non-blocking sockets progressed by poll() on the caller's
// thread.
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/socket.hpp"
#include "mci/store.hpp"
#include "transport/connect_mode.hpp"
#include "transport/frame.hpp"
#include "transport/tcp/tcp_links.hpp"
#include "transport/transport.hpp"

namespace mci::transport {

// How a wait that is not done yet behaves before it sleeps in poll().
struct TcpWait {
  // Keep polling without sleeping this long: a sleeping process wakes
  // several microseconds after its data arrives. Only worth it while every
  // rank of this host has a core.
  std::chrono::nanoseconds spin{0};
  // Without spin (ranks outnumber cores): poll and give the core away
  // (sched_yield) this long; the rank it waits for may need the core, and a
  // sleep in poll() costs a wake-up of tens of microseconds.
  std::chrono::nanoseconds yield{0};
};

class TcpTransport final : public Transport, public ArrivalLog {
 public:
  // abort() waits at most this long in all to tell the peers why (a loaded
  // machine may take a few hundred ms to schedule the reading peer).
  static constexpr auto kAbortFlush = std::chrono::milliseconds(1000);
  // peers[i] is the connected socket to rank i (invalid for this rank).
  TcpTransport(int rank, int size, std::vector<Fd> peers, TcpWait wait = {});
  // Lazy: connects through `links` when an operation first names a peer
  // (and keeps `peers`, those already connected).
  TcpTransport(int rank, int size, std::vector<std::pair<int, Fd>> peers, std::unique_ptr<PeerLinks> links,
               TcpWait wait = {});
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "tcp"; }

  OpHandle post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) override;
  OpHandle post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) override;
  // While it is pending, every connected peer is read (and a peer that
  // connects meanwhile, lazy mode); a frame goes to the first receive of its
  // slot posted, for its peer or from any source. Frames nobody claims are
  // stashed: a receive from any source takes the one stashed first.
  OpHandle post_recv_any(const Fingerprint& fp, void* data, std::size_t bytes) override;
  int source(const OpHandle& op) const override;
  void wait(const OpHandle& op, const Deadline& dl) override;
  void wait_all(const Deadline& dl) override;
  bool done(const OpHandle& op) const override;
  void progress(std::chrono::milliseconds max_wait, const Deadline& dl) override;
  void reap() override;
  void begin_op(std::int64_t arrival_ns) override { latest_ = Arrival{rank_, arrival_ns}; }
  Arrival latest() const override { return latest_; }
  void abort(const std::string& reason) noexcept override;
  void interrupt(const std::string& reason) noexcept override;
  void close() noexcept override;

  // The peers this rank has a connection to (or is connecting to).
  std::size_t connections() const { return active_.size(); }

 private:
  struct SendOp {
    std::array<std::uint8_t, kFrameHeaderSize> hdr{};
    const std::uint8_t* data = nullptr;
    std::size_t bytes = 0;
    std::size_t done = 0;  // over header + payload
    Fingerprint fp;
  };
  struct RecvOp {
    Fingerprint fp;
    std::uint8_t* data = nullptr;
    std::size_t bytes = 0;
    bool done = false;
    bool active = false;       // a frame is being read into it
    std::uint64_t posted = 0;  // posting order among this rank's receives, whatever their peer
  };
  struct AnyRecv {
    RecvOp op;
    int source = -1;  // the peer whose frame it took
  };
  struct Stashed {
    FrameHeader h;
    std::vector<std::uint8_t> payload;
    std::uint64_t order = 0;  // arrival order among every peer's stashed frames
  };
  struct Peer {
    Fd fd;
    std::deque<SendOp> sends;
    std::uint64_t sends_posted = 0;
    std::uint64_t sends_done = 0;
    std::deque<RecvOp> recvs;
    std::uint64_t recv_base = 0;  // index of recvs.front() among all recvs posted
    std::size_t recvs_left = 0;
    // The frame being read.
    std::array<std::uint8_t, kFrameHeaderSize> hdr{};
    std::size_t hdr_got = 0;
    std::optional<FrameHeader> cur;
    RecvOp* target = nullptr;       // null: payload goes to `partial`
    AnyRecv* any_target = nullptr;  // target is this receive from any source
    std::vector<std::uint8_t> partial;
    std::size_t got = 0;
    std::deque<Stashed> stash;  // complete frames nobody asked for yet
    bool bye = false;
    bool eof = false;
    std::string abort_reason;
  };

  // The peer's state, connecting on first use: one predictable branch
  // once connected.
  Peer& peer(int p) {
    Peer* x = peers_[static_cast<std::size_t>(p)].get();
    if (!x) [[unlikely]]
      return open(p);
    return *x;
  }
  Peer& open(int p);
  void attach(int p, Fd fd);
  void advance_links();

  template <class Done>
  void progress_until(Done done, const Deadline& dl);
  // Polls without sleeping for up to spin_ns_ (or, with no spin, polls and
  // yields the core for up to yield_ns_); returns whether done().
  template <class Done>
  bool spin(Done done, const Deadline& dl);
  bool pending() const;
  // Moves what can move without waiting; then, if `poll_ms` > 0 and work is
  // pending, waits that long for a socket to become ready.
  void step(int poll_ms);
  bool progress_send(int peer);
  // The part of a frame still to send, as at most two iovecs; their count.
  static int rest_of_frame(const SendOp& op, iovec iov[2]);
  void progress_recv(int peer, bool drain);
  void on_header(int peer);
  void on_frame_complete(int peer);
  void match_stash(int peer, RecvOp& op);
  // Gives each pending receive from any source the matching frame stashed
  // first, from whichever peer.
  void match_any_stash();
  // The first receive not complete nor being read into that a frame of
  // this slot would go to: the peer's own, and one from any source (p2p
  // frames only).
  static RecvOp* first_unclaimed(Peer& p, const FrameHeader& h);
  AnyRecv* first_unclaimed_any(const FrameHeader& h);
  // Frames are read from a peer while something may claim them.
  bool reading(const Peer& p) const { return p.recvs_left > 0 || p.cur || any_left_ > 0; }
  // With a receive from any source pending: a PeerError once every other
  // rank has left (nobody can send it any more).
  void check_any_sender_left();
  const AnyRecv* first_pending_any() const;
  [[noreturn]] void peer_gone(int peer, const char* how);
  [[noreturn]] void timeout(const Deadline& dl);
  std::string pending_desc() const;
  void check_usable() const;

  int rank_;
  int size_;
  // By rank, allocated on first use: a job of n ranks costs n pointers
  // here, plus a Peer per rank actually talked to.
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<int> active_;           // ranks with a Peer, in the order they came
  std::deque<AnyRecv> any_;           // receives from any source, in posting order
  std::uint64_t any_base_ = 0;        // index of any_.front() among all posted
  std::size_t any_left_ = 0;          // of any_, those not complete
  std::uint64_t stash_order_ = 0;     // the next Stashed::order
  std::uint64_t recvs_posted_ = 0;    // the next RecvOp::posted
  std::unique_ptr<PeerLinks> links_;  // lazy mode; null once all are connected
  std::int64_t spin_ns_ = 0;
  std::int64_t yield_ns_ = 0;
  std::vector<pollfd> poll_fds_;  // reused by step()
  std::vector<int> poll_who_;
  bool broken_ = false;
  // interrupt(): set from another thread; the waits poll wake_ with their
  // sockets, and throw interrupt_reason_ once they see the flag.
  Fd wake_;  // an eventfd
  std::atomic<bool> interrupted_{false};
  mutable std::mutex interrupt_mu_;
  std::string interrupt_reason_;
  void throw_if_interrupted();
  Arrival latest_;
};

// Builds the mesh: every rank listens on `listen_host` and publishes its
// address in the store. Eager: connects to lower ranks and accepts higher
// ones before returning. Lazy: returns at once and connects on first use
// (`store` must then outlive the transport). Each connection proves the job
// token (when set) and the group `session`.
std::unique_ptr<TcpTransport> connect_tcp_mesh(Store& store, int rank, int size, const std::string& listen_host,
                                               const std::string& session, const std::string& token, const Deadline& dl,
                                               TcpWait wait = {}, ConnectMode mode = ConnectMode::eager);

}  // namespace mci::transport
