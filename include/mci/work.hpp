// Work: the single handle for anything a group runs. Blocking calls return a
// completed Work; async calls return one the caller waits on later.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

namespace mci {

class Work {
 public:
  struct State;

  Work();  // an already completed, successful no-op
  explicit Work(std::shared_ptr<State> s);

  // Blocks until the operation is done; rethrows its error (TimeoutError,
  // PeerError, MismatchError, ...). Every operation is bounded by the group
  // timeout, so this never blocks forever.
  void wait() const;
  // Device work (nccl): makes `cuda_stream` (a cudaStream_t; nullptr is the
  // legacy default stream) wait for the operation on the GPU without
  // blocking the host, as a CUDA stream wait on the operation's event. The
  // host only waits until the operation is on the GPU's queue (an async call
  // may still be queued on the progress thread). Host work and operations
  // already finished return at once; an error already known is rethrown,
  // one found later surfaces at wait() or the next call.
  void wait_stream(void* cuda_stream) const;
  // Waits at most `limit`; true if the operation is done (success or not).
  bool wait_for(std::chrono::milliseconds limit) const;
  bool is_completed() const;
  bool is_success() const;  // completed without error
  std::exception_ptr exception() const;

  // How long the operation took. Host work (and device buffers on the cpu
  // and gloo backends): from when this rank started it (an async one: when
  // the progress thread took it) to its end, on the host's steady clock
  // (read through the CPU's time-stamp counter where it is invariant, unless
  // MCI_CLOCK=steady). The nccl backend's collectives: the GPU's own time, between CUDA
  // events recorded around the operation on the group's stream, so work
  // queued before it on the stream is not counted (the flight recorder, the
  // monitor's page and /metrics use the same figure).
  // Zero until completed.
  std::chrono::nanoseconds duration() const;
  double duration_ms() const;

  // Collective sequence number in the group (1-based; 0 for point-to-point).
  std::uint64_t seq() const;
  // "all_reduce", "broadcast", ..., "send", "recv".
  std::string op() const;
  // The algorithm that ran it: "ring", "shm_direct", "hierarchical", "p2p",
  // ... ("library" when the backend's library chose: gloo, nccl, mpi). The names
  // MCI_ALGO takes; docs/env.md lists them.
  std::string algorithm() const;
  // For a completed recv: the rank its data came from (its src, or for a
  // recv from any_source, the rank whose send it took). -1 for every other
  // operation, for a recv not completed yet and for one that failed.
  int source() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace mci
