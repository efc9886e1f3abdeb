// The nccl backend: NVIDIA NCCL on device memory, one GPU per process
// (LOCAL_RANK picks it). The communicator is non-blocking, so every wait —
// communicator creation and each operation — is watched against the group
// timeout; on timeout the communicator is aborted and the rank raises
// TimeoutError instead of hanging in NCCL. Asynchronous NCCL errors (a peer
// that died, a broken link) surface as PeerError.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "backends/cuda_util.hpp"
#include "backends/registry.hpp"
#include "collectives/desc.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"

namespace mci {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i8: return ncclInt8;
    case DType::u8: return ncclUint8;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  return ncclFloat32;
}

// The device for this rank: InitOptions::device, else LOCAL_RANK.
int pick_device(const BackendContext& ctx) {
  const int count = cuda::device_count();
  if (count == 0) {
    throw ConfigError(
        "backend 'nccl' needs a visible GPU, and this process sees none (check "
        "CUDA_VISIBLE_DEVICES and the NVIDIA driver); use backend 'cpu' or 'gloo' for "
        "host memory");
  }
  const int device = ctx.device >= 0 ? ctx.device : ctx.local_rank;
  if (device < 0 || device >= count) {
    throw ConfigError(
        fmt::format("backend 'nccl': rank {} would use GPU {} ({}) but this process sees {} "
                    "GPU(s); start one process per GPU (mcirun --nproc_per_node=gpu)",
                    ctx.rank, device, ctx.device >= 0 ? "InitOptions::device" : "LOCAL_RANK", count));
  }
  return device;
}

// Names a GPU uniquely across the job: the machine (hostname and boot id:
// identical nodes may share a hostname) and the device's PCI address.
std::string gpu_identity(int device) {
  char bus[32] = {};
  cuda::check(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId");
  return fmt::format("PCI {} on {}", bus, machine_identity());
}

// A CUDA event recorded after one operation (with timing: it also ends the
// operation's timed window).
struct EventFence final : DeviceFence {
  cuda::Event event;
  void order_stream(void* stream) const override {
    cuda::check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event.get(), 0), "cudaStreamWaitEvent");
  }
};

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(const BackendContext& ctx) : rank_(ctx.rank), size_(ctx.size) {
    const Deadline dl(ctx.timeout);
    // Every rank says whether it has its GPU before anyone enters NCCL, so a
    // rank that cannot join stops the others at once instead of leaving them
    // in ncclCommInitRank until the timeout, and two ranks on one GPU get
    // mci's message rather than NCCL's.
    const auto gpus = run_together(*ctx.store, "nccl/gpu", rank_, size_, dl, "join the nccl group", [&] {
      device_ = pick_device(ctx);
      cuda::check(cudaSetDevice(device_), "cudaSetDevice");
      return gpu_identity(device_);
    });
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && gpus[static_cast<std::size_t>(r)] == gpus[static_cast<std::size_t>(rank_)]) {
        throw ConfigError(
            fmt::format("ranks {} and {} both use GPU {} ({}) : NCCL needs one GPU per rank. Start one process per GPU "
                        "(mcirun --nproc_per_node=gpu sets LOCAL_RANK), set InitOptions::device, or use backend 'cpu' "
                        "to share one GPU between ranks",
                        std::min(r, rank_), std::max(r, rank_), device_, gpus[static_cast<std::size_t>(rank_)]));
      }
    }
    // A blocking stream: NCCL work is ordered after what the caller queued on
    // the legacy default stream (its kernels and copies that filled the
    // buffers), and later default-stream work after it.
    cuda::check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    // Events belong to the current device. Both time: each operation is
    // timed between them on the GPU (Work::duration, the flight recorder).
    started_.emplace();
    done_.emplace();
    ncclUniqueId id{};
    if (rank_ == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      StoreValue b(sizeof id);
      std::memcpy(b.data(), &id, sizeof id);
      ctx.store->set("nccl/id", b);
    } else {
      const StoreValue b = ctx.store->get("nccl/id", dl.wait_left());
      if (b.size() != sizeof id) throw Error("mci nccl: the NCCL id in the store has the wrong size");
      std::memcpy(&id, b.data(), sizeof id);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // so that creation and every operation can be watched
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) check(r, "ncclCommInitRankConfig");
    settle(dl, "creating the NCCL communicator", nullptr);
  }

  ~NcclBackend() override {
    close();
    if (stream_) cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "nccl"; }
  void* cuda_stream() const override { return stream_; }

  void prepare(coll::CollectiveDesc& d) override {
    if (!d.device.is_cuda() && d.kind != OpKind::barrier) {
      throw ConfigError(
          fmt::format("the nccl backend works on GPU memory, and this {} buffer is on the "
                      "host; pass a cuda device buffer, or use backend 'cpu' or 'gloo' for "
                      "host memory",
                      op_name(d.kind)));
    }
    d.algo = Algo::library;
  }

  void run(const coll::CollectiveDesc& d, const Deadline& dl) override { run_async(d, dl, nullptr); }

  void run_async(const coll::CollectiveDesc& d, const Deadline& dl, const FenceSink& enqueued) override {
    cuda::check(cudaSetDevice(device_), "cudaSetDevice");
    last_device_ns_.reset();
    cuda::check(cudaEventRecord(started_->get(), stream_), "cudaEventRecord");
    enqueue(d);
    settle(dl, "enqueueing", &d);
    // Each operation gets its own event when someone may order a stream
    // after it (the event must outlive the next operation's record).
    std::shared_ptr<EventFence> fence = enqueued ? std::make_shared<EventFence>() : nullptr;
    const cudaEvent_t done = fence ? fence->event.get() : done_->get();
    cuda::check(cudaEventRecord(done, stream_), "cudaEventRecord");
    if (enqueued) enqueued(fence);
    wait_event(done, d, dl);
    // The GPU's time from reaching the operation to its end (the start event
    // completes once work queued before it on the stream is done), at the
    // events' resolution of about half a microsecond.
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, started_->get(), done), "cudaEventElapsedTime");
    last_device_ns_ = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }

  std::optional<std::int64_t> last_device_ns() const override { return last_device_ns_; }

  void abort(const std::string& reason) noexcept override {
    if (comm_ && !aborted_) {
      log::warn("aborting the NCCL communicator: {}", reason);
      ncclCommAbort(comm_);
      aborted_ = true;
      comm_ = nullptr;
    }
  }

  // The waits (settle, wait_event) poll; they see the flag within tens of
  // microseconds and throw, and the failing thread's abort() aborts the
  // communicator (NCCL's own abort from a thread other than the one
  // inside it would race with that thread's use of comm_).
  void interrupt(const std::string& reason) noexcept override {
    std::lock_guard lk(interrupt_mu_);
    if (!interrupted_.load()) interrupt_reason_ = reason;
    interrupted_.store(true, std::memory_order_release);
  }

  void close() noexcept override {
    if (!comm_ || aborted_) return;
    // Finalize flushes outstanding work; bounded, then abort if peers are gone.
    try {
      cudaSetDevice(device_);
      const ncclResult_t r = ncclCommFinalize(comm_);
      if (r == ncclSuccess || r == ncclInProgress) settle(Deadline(std::chrono::seconds(10)), "finalizing", nullptr);
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } catch (const std::exception& e) {
      abort(e.what());
    }
  }

 private:
  void check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    const char* last = comm_ ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
    const std::string msg = fmt::format("NCCL error in {} on rank {}: {}{}{}", what, rank_, ncclGetErrorString(r),
                                        last && *last ? ": " : "", last ? last : "");
    if (r == ncclRemoteError || r == ncclSystemError) throw PeerError(msg + " (a peer failed or the link broke)", -1);
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) throw ConfigError(msg);
    throw Error(msg);
  }

  // Waits until the communicator has no operation in progress.
  void throw_if_interrupted() {
    if (!interrupted_.load(std::memory_order_acquire)) return;
    std::lock_guard lk(interrupt_mu_);
    throw Error(interrupt_reason_);
  }

  void settle(const Deadline& dl, const char* doing, const coll::CollectiveDesc* d) {
    while (true) {
      throw_if_interrupted();
      ncclResult_t st = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) check(st, doing);
      if (dl.expired()) timeout(dl, doing, d);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void wait_event(cudaEvent_t done, const coll::CollectiveDesc& d, const Deadline& dl) {
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) cuda::check(q, "waiting for the NCCL operation");
      ncclResult_t st = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
      if (st != ncclSuccess && st != ncclInProgress) check(st, op_name(d.kind).data());
      if (dl.expired()) timeout(dl, "waiting for the GPU", &d);
      throw_if_interrupted();
      if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  [[noreturn]] void timeout(const Deadline& dl, const char* doing, const coll::CollectiveDesc* d) {
    const std::string what = d ? d->fingerprint().describe() : std::string("NCCL setup");
    abort(fmt::format("timeout while {}", doing));
    throw TimeoutError(
        fmt::format("Timed out waiting {}ms for {} on rank {} (nccl, {}): a peer never entered the operation or is "
                    "stuck; the NCCL communicator was aborted",
                    dl.budget().count(), what, rank_, doing));
  }

  void enqueue(const coll::CollectiveDesc& d) {
    const ncclDataType_t t = nccl_type(d.dtype);
    const std::size_t bytes = d.bytes();
    auto* out = static_cast<std::uint8_t*>(d.out);
    const auto* in = static_cast<const std::uint8_t*>(d.in);
    auto ok = [&](ncclResult_t r, const char* what) {
      if (r != ncclSuccess && r != ncclInProgress) check(r, what);
    };
    switch (d.kind) {
      case OpKind::all_reduce:
        ok(ncclAllReduce(in, out, d.count, t, nccl_op(d.op), comm_, stream_), "ncclAllReduce");
        return;
      case OpKind::broadcast:
        ok(ncclBroadcast(rank_ == d.root ? in : out, out, d.count, t, d.root, comm_, stream_), "ncclBroadcast");
        return;
      case OpKind::reduce:
        ok(ncclReduce(in, rank_ == d.root ? out : scratch_.get(bytes), d.count, t, nccl_op(d.op), d.root, comm_,
                      stream_),
           "ncclReduce");
        return;
      case OpKind::all_gather: ok(ncclAllGather(in, out, d.count, t, comm_, stream_), "ncclAllGather"); return;
      case OpKind::reduce_scatter:
        ok(ncclReduceScatter(in, out, d.count, t, nccl_op(d.op), comm_, stream_), "ncclReduceScatter");
        return;
      case OpKind::barrier: {
        void* one = scratch_.get(sizeof(float));
        ok(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
        return;
      }
      case OpKind::send: ok(ncclSend(in, d.count, t, d.peer, comm_, stream_), "ncclSend"); return;
      case OpKind::recv: ok(ncclRecv(out, d.count, t, d.peer, comm_, stream_), "ncclRecv"); return;
      case OpKind::gather:
      case OpKind::scatter:
      case OpKind::all_to_all: grouped(d, t, in, out, bytes); return;
      default: refuse_kind("nccl", d.kind);  // a kind its row does not list: the front end refused it already
    }
  }

  // gather, scatter and all_to_all as grouped sends and receives.
  void grouped(const coll::CollectiveDesc& d, ncclDataType_t t, const std::uint8_t* in, std::uint8_t* out,
               std::size_t bytes) {
    auto ok = [&](ncclResult_t r, const char* what) {
      if (r != ncclSuccess && r != ncclInProgress) check(r, what);
    };
    if (d.kind == OpKind::all_to_all && in < out + bytes * size_ && out < in + bytes * size_) {
      auto* copy = static_cast<std::uint8_t*>(scratch_.get(bytes * size_));
      cuda::check(cudaMemcpyAsync(copy, in, bytes * size_, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
      in = copy;
    }
    ok(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      const std::size_t at = bytes * static_cast<std::size_t>(r);
      if (d.kind == OpKind::gather) {
        if (rank_ == d.root && r != rank_) ok(ncclRecv(out + at, d.count, t, r, comm_, stream_), "ncclRecv");
        if (rank_ != d.root && r == d.root) ok(ncclSend(in, d.count, t, r, comm_, stream_), "ncclSend");
      } else if (d.kind == OpKind::scatter) {
        if (rank_ == d.root && r != rank_) ok(ncclSend(in + at, d.count, t, r, comm_, stream_), "ncclSend");
        if (rank_ != d.root && r == d.root) ok(ncclRecv(out, d.count, t, r, comm_, stream_), "ncclRecv");
      } else if (r != rank_) {
        ok(ncclSend(in + at, d.count, t, r, comm_, stream_), "ncclSend");
        ok(ncclRecv(out + at, d.count, t, r, comm_, stream_), "ncclRecv");
      }
    }
    ok(ncclGroupEnd(), "ncclGroupEnd");
    // This rank's own block.
    const std::size_t mine = bytes * static_cast<std::size_t>(rank_);
    const std::uint8_t* src = nullptr;
    std::uint8_t* dst = nullptr;
    if (d.kind == OpKind::gather && rank_ == d.root) {
      src = in;
      dst = out + mine;
    } else if (d.kind == OpKind::scatter && rank_ == d.root) {
      src = in + mine;
      dst = out;
    } else if (d.kind == OpKind::all_to_all) {
      src = in + mine;
      dst = out + mine;
    }
    if (src && src != dst && bytes) {
      cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
    }
  }

  int rank_;
  int size_;
  int device_ = 0;
  cudaStream_t stream_{};
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::atomic<bool> interrupted_{false};
  std::mutex interrupt_mu_;
  std::string interrupt_reason_;
  std::optional<cuda::Event> started_, done_;
  std::optional<std::int64_t> last_device_ns_;
  cuda::DeviceBuffer scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const BackendContext& ctx) { return std::make_unique<NcclBackend>(ctx); }

}  // namespace mci
