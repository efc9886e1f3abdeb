// ProcessGroup: rank, size and every collective and point-to-point operation.
//
// Every rank must call the same collectives in the same order with the same
// count, dtype, op and root. mci checks it: ranks that disagree get a
// MismatchError, never a silently wrong result.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mci/op_kind.hpp"
#include "mci/types.hpp"
#include "mci/work.hpp"

namespace mci {

// How a call runs: blocking (on the caller's thread, returns when done) or
// async (queued in order on the group's progress thread; call Work::wait()).
enum class Exec : std::uint8_t { blocking, async };

// recv's src for "whichever rank sends first" (MPI_ANY_SOURCE; torch's
// dist.recv without src). Work::source() then names the rank it came from.
inline constexpr int any_source = -1;

// One operation of any kind, as data: what ProcessGroup::run takes and
// each named call below builds. Its buffers' extents are its kind's row
// (mci/op_kind.hpp: op_shape); the fields a kind does not use are ignored.
struct OpCall {
  OpKind kind = OpKind::barrier;
  BufferView in{};
  BufferView out{};
  ReduceOp op = ReduceOp::sum;  // reductions only
  int root = -1;                // broadcast, reduce, gather, scatter
  int peer = -1;                // send: the destination; recv: the source (or any_source)
  int tag = 0;                  // send, recv
};

class ProcessGroup {
 public:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  // Drains queued async work, then closes the group's connections.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  const std::string& backend() const;
  std::chrono::milliseconds timeout() const;
  // The timeout of the operations issued from now on (those already issued
  // keep theirs), as torch's Backend::setTimeout; positive, else ConfigError.
  void set_timeout(std::chrono::milliseconds timeout);

  // data <- reduction of every rank's data.
  Work all_reduce(BufferView data, ReduceOp op = ReduceOp::sum, Exec e = Exec::blocking);
  Work all_reduce(BufferView in, BufferView out, ReduceOp op = ReduceOp::sum, Exec e = Exec::blocking);
  // Every rank's data <- root's data.
  Work broadcast(BufferView data, int root, Exec e = Exec::blocking);
  Work broadcast(BufferView in, BufferView out, int root, Exec e = Exec::blocking);
  // root's data <- reduction; other ranks' buffers are left untouched.
  Work reduce(BufferView data, int root, ReduceOp op = ReduceOp::sum, Exec e = Exec::blocking);
  Work reduce(BufferView in, BufferView out, int root, ReduceOp op = ReduceOp::sum, Exec e = Exec::blocking);
  // out (size() * in.count) <- every rank's in, in rank order. In place when
  // in.data is out's slice for this rank.
  Work all_gather(BufferView in, BufferView out, Exec e = Exec::blocking);
  // root's out (size() * in.count) <- every rank's in; out unused elsewhere.
  Work gather(BufferView in, BufferView out, int root, Exec e = Exec::blocking);
  // out <- slice rank of root's in (size() * out.count); in unused elsewhere.
  Work scatter(BufferView in, BufferView out, int root, Exec e = Exec::blocking);
  // out <- slice rank of the reduction of every rank's in (size() * out.count).
  Work reduce_scatter(BufferView in, BufferView out, ReduceOp op = ReduceOp::sum, Exec e = Exec::blocking);
  // Slice j of in goes to rank j; slice i of out comes from rank i.
  Work all_to_all(BufferView in, BufferView out, Exec e = Exec::blocking);
  Work barrier(Exec e = Exec::blocking);
  // Any kind, from its row: what the C interface, mci-perf and the torch
  // backend's generic paths call, so a new kind needs no call of its own
  // there. Checked as the named calls are (a ConfigError says what to
  // change; a kind the backend's row lacks is refused, naming those that
  // run it).
  Work run(const OpCall& call, Exec e = Exec::blocking);

  // Point-to-point. A recv matches the oldest send from src with the same tag.
  // With src = any_source it takes the oldest matching send (same tag, same
  // count and dtype) from whichever rank's arrives first; from any one rank,
  // its sends are taken in the order they were made. Receives are matched in
  // the order posted: a recv naming rank r posted before it has the first
  // claim on r's sends, and it on everyone's before a recv posted after it.
  // Work::source() says which rank it got. Backends that cannot match a
  // sender they do not know (gloo, nccl, mpi) refuse it with a ConfigError;
  // any_source is for recv only (a send needs its dst).
  Work send(BufferView data, int dst, int tag = 0, Exec e = Exec::blocking);
  Work recv(BufferView data, int src, int tag = 0, Exec e = Exec::blocking);

  // Collectives issued so far (the sequence number of the last one).
  std::uint64_t last_seq() const;

  // Fails queued work and breaks the connections so peers notice at once.
  // Every later call throws.
  void abort(const std::string& reason);

  // The flight recorder in torch's flight-recorder format, which torch's
  // torchfrtrace analyses (docs/troubleshooting.md, "Reading mci's records
  // with torchfrtrace"): writes the records of every group of this process
  // to <path_prefix><rank in the job> and returns that path. An empty
  // prefix: MCI_FR_DUMP_DIR's (else TORCH_FR_DUMP_TEMP_FILE); with neither,
  // a ConfigError. A timeout writes it there by itself, on every rank.
  std::string dump_flight_recorder(const std::string& path_prefix = {}) const;
  // How dumps name this group and its members: torch's group name and
  // description, and the rank in the job of each group rank (job_ranks[i]
  // for group rank i). Defaults: mci's name of the group, "undefined", and
  // 0 .. size()-1 (a shrunk group keeps its members' ranks); an empty
  // argument keeps the current value. mci_torch gives torch's.
  void name_for_dumps(const std::string& name, const std::string& desc, const std::vector<int>& job_ranks = {});

  // Going on without lost ranks (docs/fault-tolerance.md, "In place"):
  // typically after a PeerError, every rank still alive calls shrink(); they
  // agree through the store on who is gone (the same set on every one, also
  // when ranks die during the agreement) and form the group of the others,
  // ranks renumbered in their old order, over the same store, with the
  // same options. This group is aborted first, so a peer still inside an
  // operation fails at once and comes to shrink() too. `exclude` leaves
  // ranks out although alive (they must not call shrink). A rank that the
  // others declared lost (it came after they decided, or was excluded) gets
  // a PeerError naming its rank: it cannot rejoin. Needs mci's store (the
  // launcher's, rank 0's or a TcpStore): it tells when a process is gone.
  struct Shrunk {
    std::shared_ptr<ProcessGroup> group;  // the survivors' group
    std::vector<int> kept;                // their ranks in this group, in order: group rank i was kept[i]
    std::vector<int> lost;                // ranks of this group left out
  };
  Shrunk shrink(const std::vector<int>& exclude = {});

  // Replacing lost ranks (docs/fault-tolerance.md, "Replacing a lost
  // rank"): processes started in their place call join_running_group() and
  // wait; the members learn of them at a step boundary.
  // joiners_waiting(): collective; rank 0 asks the store (one request) and
  // every rank gets its answer (a one-byte broadcast), so all decide alike.
  bool joiners_waiting();
  // grow(): collective over this group's ranks once joiners_waiting() said
  // so; the group of the members (same ranks) and the processes waiting now
  // (the next ranks, in the order they came), over the same store. This
  // group stays usable until dropped.
  struct Grown {
    std::shared_ptr<ProcessGroup> group;
    int joined = 0;  // processes added, ranks size() .. size()+joined-1
  };
  Grown grow();

 private:
  friend class CollectiveTimer;  // records CUDA events on the group's stream
  std::unique_ptr<Impl> impl_;
};

}  // namespace mci
