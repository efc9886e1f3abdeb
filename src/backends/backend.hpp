// What the ProcessGroup front end asks of a backend. The front end validates,
// numbers, records and times each operation; the backend only runs it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "collectives/desc.hpp"
#include "common/deadline.hpp"
#include "common/device_fence.hpp"
#include "common/settings.hpp"
#include "mci/store.hpp"

namespace mci {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Chooses the algorithm (sets d.algo) so it can be recorded and
  // fingerprinted before the run.
  virtual void prepare(coll::CollectiveDesc& d) = 0;
  // When this rank entered the operation about to run (steady clock ns,
  // shared by the processes of a host), for arrival bookkeeping.
  virtual void note_entry(std::int64_t /*steady_ns*/) {}

  // Runs one operation on the calling thread until it is done (for device
  // backends: until it is enqueued and, for blocking calls, finished).
  // Throws TimeoutError, PeerError, MismatchError.
  virtual void run(const coll::CollectiveDesc& d, const Deadline& dl) = 0;
  // The same for an async operation: a device backend hands `enqueued` a
  // fence as soon as the operation is on the device queue, before it waits
  // for the device, so Work::wait_stream need not wait for the host.
  virtual void run_async(const coll::CollectiveDesc& d, const Deadline& dl, const FenceSink& /*enqueued*/) {
    run(d, dl);
  }
  // Async point-to-point operations overlap each other (an isend and an
  // irecv to the same peer must not wait for one another). The front end
  // posts them, then calls progress_p2p() until p2p_done() says each is
  // complete. A backend that cannot overlap them runs each inside post_p2p.
  virtual std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline& dl) {
    run(d, dl);
    return 0;
  }
  virtual bool p2p_done(std::uint64_t /*ticket*/) { return true; }
  virtual void progress_p2p(std::chrono::milliseconds /*max_wait*/, const Deadline& /*dl*/) {}
  // Once p2p_done(ticket) said so, for a recv from any source (only on a
  // backend whose row has BackendCaps::any_source): the rank whose send it
  // took. Asked once per such ticket; -1 when the backend does not know.
  virtual int p2p_source(std::uint64_t /*ticket*/) { return -1; }

  // After run(): which rank entered the operation last and how long after
  // this rank (ns; negative if this rank was the last), when the backend
  // learns it for free from its frames.
  struct Lateness {
    int rank = -1;
    std::int64_t ns = 0;
  };
  virtual std::optional<Lateness> last_arrival() const { return std::nullopt; }

  // After run()/run_async() succeeded: the device's own time for the
  // operation, between CUDA events on its stream (nccl), in ns; nullopt for
  // a backend timed on the host. The host's window also holds the wait for
  // work queued on the stream before it, which is not the collective's.
  virtual std::optional<std::int64_t> last_device_ns() const { return std::nullopt; }

  // The CUDA stream device work is ordered on (nccl), for event timing.
  virtual void* cuda_stream() const { return nullptr; }

  // Tells the peers why we stop, without blocking, then closes.
  virtual void abort(const std::string& reason) noexcept = 0;
  // From any thread while another runs an operation of this backend
  // (ProcessGroup::abort): that operation fails within milliseconds with
  // `reason`, and so does every later one; the failing thread then calls
  // abort(). Where a backend cannot (the default), the running operation
  // ends at its own deadline (BackendCaps::aborts_running says which can).
  virtual void interrupt(const std::string& /*reason*/) noexcept {}
  // Orderly close.
  virtual void close() noexcept = 0;
};

// For backends that work on host memory only: a device buffer is refused
// with what to use instead.
void require_host_memory(const char* backend, const coll::CollectiveDesc& d);

// A kind this backend does not run: ConfigError naming the backend, the
// kind and the backends that run it. The front end refuses a call whose
// kind the backend's row (BackendCaps::kinds) lacks before it reaches the
// backend; a backend's switch over the kinds ends in this call as its
// default, so a kind added to the list is refused there, never skipped,
// and the backend needs no change until it runs it.
[[noreturn]] void refuse_kind(std::string_view backend, OpKind kind);

// Everything a backend needs to connect.
struct BackendContext {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int device = -1;               // GPU for device backends; -1: local_rank
  std::shared_ptr<Store> store;  // already prefixed for this group
  std::string session;           // unique name of this group instance
  std::string listen_host;       // address peers reach this rank at
  std::string token;             // job token, empty if none
  std::chrono::milliseconds timeout{};
  // The group's settings, resolved at init (InitOptions::settings, then
  // the environment) for what this backend honours: backends and the
  // transports below them read theirs here, never from the environment.
  Settings settings;
};

}  // namespace mci
