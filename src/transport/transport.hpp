// What algorithms see of the network: post sends and receives to peers, then
// wait for all of them under a deadline. TcpTransport implements it between
// processes, SubTransport over some ranks of another, LoopbackTransport
// between threads of one process (tests). Shared memory is not one of these:
// its algorithms read the peers' buffers in place (see shm/shm_world.hpp). Nothing moves a byte before
// wait_all(); everything posted moves concurrently inside it, so a ring step
// that sends to one neighbour while receiving from the other cannot deadlock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.hpp"
#include "common/fingerprint.hpp"
#include "mci/errors.hpp"

namespace mci::transport {

// What any transport says when used after it failed (it refuses new work
// from then on).
inline constexpr const char* kTransportBroken =
    "mci transport: this group's connections were closed after an earlier error; destroy the group and "
    "create a new one";

// OpHandle::peer of a receive from any source (post_recv_any).
inline constexpr int kAnyPeer = -1;

// Names one posted operation, to wait for it alone.
struct OpHandle {
  int peer = -1;  // kAnyPeer: a receive from any source
  bool is_recv = false;
  std::uint64_t index = 0;  // per peer and direction, in posting order
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // The fingerprint rides with the data; the receiver checks it against its
  // own, and the byte count against what it expects.
  virtual OpHandle post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) = 0;
  virtual OpHandle post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) = 0;
  // A point-to-point receive from whichever peer's matching frame (fp's tag,
  // count and dtype) comes first; from one peer, the oldest. Receives are
  // matched in the order posted: one posted for a peer earlier has the
  // first claim on that peer's frames, and this one on every peer's frames
  // before a receive posted after it. Its handle's peer is kAnyPeer. A transport that cannot match an unknown
  // sender refuses it.
  virtual OpHandle post_recv_any(const Fingerprint& fp, void* /*data*/, std::size_t /*bytes*/) {
    throw Error(std::string("mci: the ") + name() + " transport cannot receive from any source (tag " +
                std::to_string(fp.seq) + "); name the sending rank");
  }
  // For a receive that done() says is complete, until reap(): the peer its
  // frame came from (for one from any source, the peer it took). -1 for a
  // send.
  virtual int source(const OpHandle& op) const { return op.is_recv ? op.peer : -1; }
  // Progresses everything posted until this one operation is complete (so an
  // algorithm can reduce a chunk while the next ones are still arriving).
  virtual void wait(const OpHandle& op, const Deadline& dl) = 0;
  // Runs until every posted operation is complete. Throws TimeoutError at
  // the deadline (naming the peers still owed data), PeerError when a peer
  // dies, closes or aborts, MismatchError when a frame's fingerprint or size
  // differs. After a throw the transport is unusable: call abort().
  virtual void wait_all(const Deadline& dl) = 0;

  // For operations that overlap freely (async point-to-point): whether one
  // is complete, one bounded round of progress (waits at most max_wait for
  // something to happen; throws like wait_all, TimeoutError once dl passes
  // with work pending), and forgetting what has completed.
  virtual bool done(const OpHandle& op) const = 0;
  virtual void progress(std::chrono::milliseconds max_wait, const Deadline& dl) = 0;
  virtual void reap() = 0;

  // Tell every peer why we stop (best effort: it waits a moment at most, e.g.
  // to finish a frame half sent so that the reason can follow it), then close.
  virtual void abort(const std::string& reason) noexcept = 0;
  // From any thread, while another may be inside a wait: that wait, and
  // every later one, fails within milliseconds with an Error that says
  // `reason` (the waiting thread then calls abort(), which tells the peers).
  // Closes nothing itself: a transport is used by one thread at a time.
  virtual void interrupt(const std::string& /*reason*/) noexcept {}
  // Orderly goodbye: peers learn we left on purpose.
  virtual void close() noexcept = 0;
};

// Arrival bookkeeping for the straggler report, beside a transport that
// learns it for free: begin_op() marks this rank's entry into an operation
// (wall clock ns); frames carry the latest entry each sender knows of;
// latest() is the latest seen so far.
class ArrivalLog {
 public:
  struct Arrival {
    int rank = -1;
    std::int64_t ns = 0;
  };
  virtual ~ArrivalLog() = default;
  virtual void begin_op(std::int64_t arrival_ns) = 0;
  virtual Arrival latest() const = 0;
};

}  // namespace mci::transport
