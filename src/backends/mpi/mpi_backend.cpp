// The mpi backend: collectives through the MPI library the job was started
// with (Open MPI under mpirun or srun --mpi=pmix), for clusters whose fabric
// MPI reaches (InfiniBand through UCX) and mci's TCP does not. The group is
// the MPI job: its ranks must be MPI_COMM_WORLD's, in the same order.
//
// Every operation is MPI's non-blocking form, tested until done, so the wait
// is bounded by the group's timeout like on the other backends (MPI itself
// has none) and the hang report works. f16 and bf16 reductions go through
// mci's own kernels as MPI user operations; avg is a sum divided once.
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "backends/registry.hpp"
#include "collectives/kernels/reduce.hpp"
#include "common/byte_ranges.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"

namespace mci {

namespace {

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw PeerError(fmt::format("mci mpi: {} failed: {}", what, mpi_error(code)), -1);
}

// MPI is initialised once per process and finalised at its exit (MPI cannot
// be initialised again); the process-wide state is MPI's own.
void ensure_mpi_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready) return;
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      throw ConfigError(
          "backend 'mpi': this MPI library cannot be called from more than one thread (it provides "
          "less than MPI_THREAD_SERIALIZED), which async operations need; use backend 'cpu'");
    }
    std::atexit([] {
      int finalised = 0;
      MPI_Finalized(&finalised);
      if (!finalised) MPI_Finalize();
    });
  });
}

// f16 and bf16 reductions, and those of 8-bit integers (Open MPI 4.1's
// vectorised 8-bit sum saturates instead of wrapping): mci's kernels as MPI
// user operations, one per (dtype, op) since MPI passes no context.
template <DType T, ReduceOp Op>
void kernel_op(void* in, void* inout, int* len, MPI_Datatype*) {
  coll::reduce_into(inout, in, static_cast<std::size_t>(*len), T, Op);
}

struct KernelOps {
  std::map<std::pair<DType, ReduceOp>, MPI_Op> ops;
  KernelOps() {
    add_all<DType::f16>();
    add_all<DType::bf16>();
    add_all<DType::i8>();
    add_all<DType::u8>();
  }
  template <DType T>
  void add_all() {
    add<T, ReduceOp::sum>();
    add<T, ReduceOp::prod>();
    add<T, ReduceOp::min>();
    add<T, ReduceOp::max>();
  }
  template <DType T, ReduceOp Op>
  void add() {
    MPI_Op op;
    check(MPI_Op_create(&kernel_op<T, Op>, 1, &op), "MPI_Op_create");
    ops[{T, Op}] = op;
  }
  ~KernelOps() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised) return;
    for (auto& [k, op] : ops) MPI_Op_free(&op);
  }
  KernelOps(const KernelOps&) = delete;
  KernelOps& operator=(const KernelOps&) = delete;
};

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
  }
  return MPI_BYTE;
}

int checked_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT32_MAX)) {
    throw ConfigError(
        fmt::format("backend 'mpi': {} elements is more than MPI's int counts hold (2^31-1); split the "
                    "buffer or use backend 'cpu'",
                    count));
  }
  return static_cast<int>(count);
}

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(const BackendContext& ctx) : rank_(ctx.rank), size_(ctx.size) {
    const Deadline dl(ctx.timeout);
    // Every rank checks that the group is the MPI job before any collective.
    run_together(*ctx.store, "mpi/world", ctx.rank, ctx.size, dl, "join the mpi group", [&] {
      ensure_mpi_initialised();
      int r = -1, n = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &r);
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      if (r != ctx.rank || n != ctx.size) {
        throw ConfigError(fmt::format(
            "backend 'mpi' needs the group to be the MPI job, rank for rank: MPI says this process is rank {} of {}, "
            "the group says rank {} of {}. Start the program with mpirun or srun --mpi=pmix and let init read "
            "their variables (do not export RANK/WORLD_SIZE by hand), or use backend 'cpu'",
            r, n, ctx.rank, ctx.size));
      }
      return std::string();
    });
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    kernels_ = std::make_unique<KernelOps>();
  }

  ~MpiBackend() override { close(); }

  const char* name() const override { return "mpi"; }

  void prepare(coll::CollectiveDesc& d) override {
    require_host_memory("mpi", d);
    if (is_p2p(d.kind) && d.tag > tag_ub()) {
      throw ConfigError(
          fmt::format("backend 'mpi': tag {} is above this MPI's largest tag ({}); use smaller tags", d.tag, tag_ub()));
    }
    d.algo = Algo::library;
  }

  void run(const coll::CollectiveDesc& d, const Deadline& dl) override {
    MPI_Request req = start(d);
    wait(req, d, dl);
    finish(d);
  }

  std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline&) override {
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = checked_count(d.count);
    if (d.kind == OpKind::send) {
      check(MPI_Isend(d.in, n, mpi_type(d.dtype), d.peer, d.tag, comm_, &req), "MPI_Isend");
    } else {
      check(MPI_Irecv(d.out, n, mpi_type(d.dtype), d.peer, d.tag, comm_, &req), "MPI_Irecv");
    }
    inflight_.emplace(++next_ticket_, Inflight{req, d});
    return next_ticket_;
  }

  bool p2p_done(std::uint64_t ticket) override {
    auto it = inflight_.find(ticket);
    if (it == inflight_.end()) return true;
    if (it->second.req != MPI_REQUEST_NULL) return false;
    inflight_.erase(it);
    return true;
  }

  void progress_p2p(std::chrono::milliseconds max_wait, const Deadline& dl) override {
    const auto until = std::min(Clock::now() + max_wait, dl.at());
    do {
      bool any = false;
      for (auto& [t, f] : inflight_) {
        if (f.req == MPI_REQUEST_NULL) continue;
        int done = 0;
        MPI_Status st;
        check(MPI_Test(&f.req, &done, &st), f.d.kind == OpKind::send ? "MPI_Isend" : "MPI_Irecv");
        if (done && f.d.kind == OpKind::recv) check_received(f.d, st);
        any = any || done;
      }
      if (any) return;
      std::this_thread::yield();
    } while (Clock::now() < until);
    bool pending = false;
    for (auto& [t, f] : inflight_) pending = pending || f.req != MPI_REQUEST_NULL;
    if (pending && dl.expired()) {
      const auto& d = inflight_.begin()->second.d;
      throw TimeoutError(fmt::format("Timed out waiting {}ms for {} {} rank {} on backend mpi", dl.budget().count(),
                                     d.fingerprint().describe(), d.kind == OpKind::send ? "to" : "from", d.peer));
    }
  }

  void abort(const std::string&) noexcept override {
    // MPI has no way to tell the peers why without ending the whole job
    // (MPI_Abort would also kill this process before it reports): peers in
    // a collective with this rank find out at their timeout, with the hang
    // report saying where this rank stopped.
    broken_ = true;
  }

  void close() noexcept override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (comm_ != MPI_COMM_NULL && !finalised && !broken_) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

 private:
  struct Inflight {
    MPI_Request req;
    coll::CollectiveDesc d;
  };

  static int tag_ub() {
    void* v = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    return flag ? *static_cast<int*>(v) : 32767;
  }

  MPI_Op op_of(const coll::CollectiveDesc& d) const {
    const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;
    if (auto it = kernels_->ops.find({d.dtype, op}); it != kernels_->ops.end()) return it->second;
    switch (op) {
      case ReduceOp::prod: return MPI_PROD;
      case ReduceOp::min: return MPI_MIN;
      case ReduceOp::max: return MPI_MAX;
      default: return MPI_SUM;
    }
  }

  // A copy of the input where MPI's in-place rules do not match mci's
  // layout (or the input overlaps the output).
  const void* aside(const void* in, std::size_t bytes) {
    std::uint8_t* copy = scratch_.get(bytes);
    if (bytes) std::memcpy(copy, in, bytes);
    return copy;
  }

  MPI_Request start(const coll::CollectiveDesc& d) {
    MPI_Request req = MPI_REQUEST_NULL;
    const MPI_Datatype t = mpi_type(d.dtype);
    const int n = checked_count(d.count);
    const std::size_t block = d.bytes();
    auto* out = static_cast<std::uint8_t*>(d.out);
    const auto* in = static_cast<const std::uint8_t*>(d.in);
    const bool root = rank_ == d.root;
    switch (d.kind) {
      case OpKind::all_reduce:
        check(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, n, t, op_of(d), comm_, &req), "MPI_Iallreduce");
        break;
      case OpKind::broadcast:
        if (root && in != out && block) std::memcpy(out, in, block);
        check(MPI_Ibcast(out, n, t, d.root, comm_, &req), "MPI_Ibcast");
        break;
      case OpKind::reduce:
        check(MPI_Ireduce(root && in == out ? MPI_IN_PLACE : in, root ? out : nullptr, n, t, op_of(d), d.root, comm_,
                          &req),
              "MPI_Ireduce");
        break;
      case OpKind::all_gather:
        check(MPI_Iallgather(in == out + block * rank_ ? MPI_IN_PLACE : in, n, t, out, n, t, comm_, &req),
              "MPI_Iallgather");
        break;
      case OpKind::gather:
        check(MPI_Igather(root && in == out + block * rank_ ? MPI_IN_PLACE : in, n, t, root ? out : nullptr, n, t,
                          d.root, comm_, &req),
              "MPI_Igather");
        break;
      case OpKind::scatter:
        check(MPI_Iscatter(root ? in : nullptr, n, t, root && out == in + block * rank_ ? MPI_IN_PLACE : out, n, t,
                           d.root, comm_, &req),
              "MPI_Iscatter");
        break;
      case OpKind::reduce_scatter: {
        const std::size_t total = block * static_cast<std::size_t>(size_);
        const void* src = ranges_overlap(in, total, out, block) ? aside(in, total) : in;
        check(MPI_Ireduce_scatter_block(src, out, n, t, op_of(d), comm_, &req), "MPI_Ireduce_scatter_block");
        break;
      }
      case OpKind::all_to_all: {
        const std::size_t total = block * static_cast<std::size_t>(size_);
        const void* src = ranges_overlap(in, total, out, total) ? aside(in, total) : in;
        check(MPI_Ialltoall(src, n, t, out, n, t, comm_, &req), "MPI_Ialltoall");
        break;
      }
      case OpKind::barrier: check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier"); break;
      case OpKind::send: check(MPI_Isend(in, n, t, d.peer, d.tag, comm_, &req), "MPI_Isend"); break;
      case OpKind::recv: check(MPI_Irecv(out, n, t, d.peer, d.tag, comm_, &req), "MPI_Irecv"); break;
      default: refuse_kind("mpi", d.kind);  // a kind its row does not list: the front end refused it already
    }
    return req;
  }

  // Tests the request until it completes or the deadline passes: spins
  // briefly (MPI progresses inside MPI_Test), then yields its core.
  void wait(MPI_Request& req, const coll::CollectiveDesc& d, const Deadline& dl) {
    const auto spin_until = Clock::now() + std::chrono::microseconds(50);
    for (;;) {
      int done = 0;
      MPI_Status st;
      check(MPI_Test(&req, &done, &st), op_name(d.kind).data());
      if (done) {
        if (d.kind == OpKind::recv) check_received(d, st);
        return;
      }
      const auto now = Clock::now();
      if (now >= dl.at()) {
        broken_ = true;  // MPI cannot cancel a collective: the group is unusable
        throw TimeoutError(fmt::format(
            "Timed out waiting {}ms for {} on backend mpi: a rank did not reach it (MPI has no timeout of its own; "
            "the hang report below says which)",
            dl.budget().count(), d.fingerprint().describe()));
      }
      if (now >= spin_until) std::this_thread::yield();
    }
  }

  void check_received(const coll::CollectiveDesc& d, const MPI_Status& st) const {
    int got = 0;
    MPI_Get_count(&st, mpi_type(d.dtype), &got);
    if (static_cast<std::size_t>(got) != d.count) {
      throw MismatchError(fmt::format("rank {} expected {} from rank {} but received {} elements", rank_,
                                      d.fingerprint().describe(), d.peer, got));
    }
  }

  void finish(const coll::CollectiveDesc& d) {
    if (d.op != ReduceOp::avg) return;
    if (d.kind == OpKind::all_reduce || d.kind == OpKind::reduce_scatter ||
        (d.kind == OpKind::reduce && rank_ == d.root)) {
      coll::finish_avg(d.out, d.count, d.dtype, size_);
    }
  }

  int rank_;
  int size_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::unique_ptr<KernelOps> kernels_;
  coll::Scratch scratch_;
  std::map<std::uint64_t, Inflight> inflight_;
  std::uint64_t next_ticket_ = 0;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const BackendContext& ctx) { return std::make_unique<MpiBackend>(ctx); }

}  // namespace mci
