// The real Gloo library behind mci's Backend interface: Gloo's TCP transport,
// rendezvous and collectives (the options API) on host memory.
//
// What Gloo lacks and how this file makes up for it:
// - bf16: Gloo has no such type. Reductions widen to f32 in scratch, reduce
//   there and narrow once; data movement moves raw bytes (as for every type).
// - reduce_scatter: the options API of this Gloo (2022-05) has none (only
//   the old ReduceScatterHalvingDoubling class with int counts). It runs as an
//   all_reduce of the whole input into scratch, then this rank's block is
//   copied out: twice the traffic of a true reduce-scatter, same result.
// - reduce writes its output buffer on every rank (it is a ring
//   reduce-scatter, then a gather to root), so non-root ranks reduce into
//   scratch: mci promises their buffers stay untouched.
// - Gloo's sends wait for their receiver; mci's complete when posted, so
//   they are buffered (gloo_sends.hpp).
// - No fingerprints in Gloo's messages: instead the fingerprint (sequence
//   number, kind, count, dtype, op, root; tag, count and dtype for send/recv)
//   is hashed into the Gloo slot each message travels on. Ranks that disagree
//   never match each other's messages, so they end in a TimeoutError (after
//   the group timeout) instead of Gloo aborting the process on a size check in
//   its device thread or silently filling part of a buffer. It costs nothing
//   per call; the price is that a mismatch is found only when the timeout
//   expires (the hang report sees it, and the group raises MismatchError).
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "backends/gloo/gloo_recvs.hpp"
#include "backends/gloo/gloo_sends.hpp"
#include "backends/gloo/gloo_store.hpp"
#include "backends/registry.hpp"
#include "collectives/kernels/reduce.hpp"
#include "common/byte_ranges.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/sigpipe_guard.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"

namespace mci {

namespace {

using gloo_backend::GlooStore;
using gloo_backend::PendingSends;
using gloo_backend::PostedRecvs;
using Func = ::gloo::AllreduceOptions::Func;

// Slot prefix for point-to-point messages, clear of the prefixes Gloo's own
// collectives use (0x01..0x08), so a send never matches a collective.
constexpr std::uint8_t kP2PSlotPrefix = 0x40;
// Unreceived sends held before a new send waits for its receivers.
constexpr std::size_t kMaxPendingSendBytes = std::size_t{256} << 20;

// Store keys (under this group's namespace) for Gloo's rendezvous and for the
// reason a rank aborted, which its peers quote in their errors.
constexpr const char* kRendezvousPrefix = "gloo";
constexpr const char* kAbortKey = "gloo-abort";

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // splitmix64's finalizer: every input bit moves every output bit.
  std::uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_fingerprint(const Fingerprint& fp) {
  std::uint64_t h = mix(0, fp.seq);
  h = mix(h, fp.count);
  h = mix(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(fp.root)));
  h = mix(h, static_cast<std::uint64_t>(fp.kind) | static_cast<std::uint64_t>(fp.dtype) << 8 |
                 static_cast<std::uint64_t>(fp.op) << 16 | static_cast<std::uint64_t>(fp.algo) << 24);
  return h;
}

// The Gloo tag of a collective (Gloo puts it in bits 24..55 of every slot the
// collective uses): the whole fingerprint, hashed.
std::uint32_t collective_tag(const coll::CollectiveDesc& d) {
  const std::uint64_t h = hash_fingerprint(d.fingerprint());
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// The slot of a send/recv: the user's tag verbatim in Gloo's tag bits (so
// distinct tags can never meet), the hash of count and dtype below it.
std::uint64_t p2p_slot(const coll::CollectiveDesc& d) {
  const std::uint64_t h = hash_fingerprint(d.fingerprint());
  return std::uint64_t{kP2PSlotPrefix} << 56 | std::uint64_t{static_cast<std::uint32_t>(d.tag)} << 24 | (h & 0xffffff);
}

std::string describe(const coll::CollectiveDesc& d) {
  if (is_p2p(d.kind)) {
    return fmt::format("{} tag {} ({} x {}) {} rank {}", op_name(d.kind), d.tag, dtype_name(d.dtype), d.count,
                       d.kind == OpKind::send ? "to" : "from", d.peer);
  }
  return d.fingerprint().describe();
}

std::string rank_list(int self, int size) {
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != self) others.push_back(r);
  }
  if (others.size() == 1) return fmt::format("peer rank {}", others[0]);
  if (others.size() <= 8) return fmt::format("one of the peer ranks {}", fmt::join(others, ", "));
  return fmt::format("one of the {} other ranks", others.size());
}

// ---- element types ---------------------------------------------------------

// Runs f(T{}) with the Gloo element type of t. bf16 has none; callers widen
// it to f32 first.
template <class F>
void with_gloo_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(::gloo::float16{}); return;
    case DType::i8: f(std::int8_t{}); return;
    case DType::u8: f(std::uint8_t{}); return;
    case DType::i32: f(std::int32_t{}); return;
    case DType::i64: f(std::int64_t{}); return;
    case DType::bf16: break;
  }
  throw Error(fmt::format("mci gloo backend: no Gloo element type for {}", dtype_name(t)));
}

// The element-wise reduction Gloo calls as fn(out, a, b, n).
template <class T>
Func reduce_fn(DType t, ReduceOp op) {
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, ::gloo::float16>) {
    using Raw = void (*)(void*, const void*, const void*, std::size_t);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<Raw>(&::gloo::sum<T>);
      case ReduceOp::prod: return static_cast<Raw>(&::gloo::product<T>);
      case ReduceOp::min: return static_cast<Raw>(&::gloo::min<T>);
      case ReduceOp::max: return static_cast<Raw>(&::gloo::max<T>);
    }
  }
  // Integers: Gloo's kernels add and multiply in the promoted type, which
  // overflows (undefined) for i32 and i64; mci's kernels wrap, like NCCL.
  const ReduceOp eff = op == ReduceOp::avg ? ReduceOp::sum : op;
  return [t, eff](void* c, const void* a, const void* b, std::size_t n) { coll::reduce_to(c, a, b, n, t, eff); };
}

void widen_bf16(float* dst, const void* src, std::size_t n) {
  const auto* s = static_cast<const BFloat16*>(src);
  for (std::size_t i = 0; i < n; ++i) dst[i] = to_float(s[i]);
}

void narrow_bf16(void* dst, const float* src, std::size_t n) {
  auto* d = static_cast<BFloat16*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = to_bfloat16(src[i]);
}

// Gloo's options take mutable pointers even for buffers they only read.
template <class T>
T* mut(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

std::uint8_t* bytes_at(const void* p, std::size_t offset) { return mut<std::uint8_t>(p) + offset; }

// ---- the backend -------------------------------------------------------------

// Gloo's rendezvous context, with access to how it slices the addresses each
// peer published (see name_peers()).
class RendezvousContext final : public ::gloo::rendezvous::Context {
 public:
  using ::gloo::rendezvous::Context::Context;
  std::vector<char> address_for(std::vector<char> published, int peer) { return extractAddress(published, peer); }
};

class GlooBackend final : public Backend {
 public:
  explicit GlooBackend(const BackendContext& ctx);
  ~GlooBackend() override;

  const char* name() const override { return "gloo"; }
  // Gloo picks its own algorithms; it works on host memory only.
  void prepare(coll::CollectiveDesc& d) override {
    require_host_memory("gloo", d);
    d.algo = Algo::library;
  }
  void run(const coll::CollectiveDesc& d, const Deadline& dl) override;
  // Async sends and receives overlap: an isend and an irecv between the same
  // two ranks, posted in either order, must not wait for each other (two
  // ranks that each posted recv then send waited for their timeouts: the
  // front end ran the recv before the send was even queued). A send is
  // buffered and never waits (gloo_sends.hpp); a recv is posted to Gloo
  // here and waited for beside them (gloo_recvs.hpp).
  std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline& dl) override;
  bool p2p_done(std::uint64_t ticket) override;
  void progress_p2p(std::chrono::milliseconds max_wait, const Deadline& dl) override;
  void abort(const std::string& reason) noexcept override;
  void close() noexcept override;

 private:
  struct Op {
    const coll::CollectiveDesc& d;
    std::uint32_t tag;
    std::chrono::milliseconds timeout;
  };

  void dispatch(const coll::CollectiveDesc& d, const Deadline& dl);
  void all_reduce(const Op& o);
  void reduce(const Op& o);
  void broadcast(const Op& o);
  void all_gather(const Op& o);
  void gather(const Op& o);
  void scatter(const Op& o);
  void reduce_scatter(const Op& o);
  void all_to_all(const Op& o);
  void barrier(const Op& o);
  void send(const Op& o, const Deadline& dl);
  void recv(const Op& o);

  // out <- reduction of every rank's in over Gloo's ring (in may equal out).
  void gloo_allreduce(const void* in, void* out, std::size_t n, DType t, ReduceOp op, const Op& o);

  // Rethrows the Gloo exception being handled as TimeoutError, PeerError or
  // Error, naming the operation (`kind`, `what`), this rank and the budget.
  [[noreturn]] void rethrow_translated(OpKind kind, const std::string& what, std::chrono::milliseconds budget,
                                       const Deadline* dl);
  void name_peers(const GlooStore& store) noexcept;
  // The rank Gloo's message names by address, or -1.
  int peer_from_message(const std::string& msg) const;
  struct AbortNote {
    int rank;
    std::string reason;
  };
  // The reason the first rank that aborted left in the store, if any.
  std::optional<AbortNote> abort_note();

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<RendezvousContext> context_;
  std::unique_ptr<PendingSends> sends_;
  coll::Scratch scratch_;
  coll::Scratch wide_;  // bf16 widened to f32
  // How Gloo names each peer in its messages ("[ip]:port") -> peer rank.
  std::map<std::string, int> peer_names_;
  std::unique_ptr<PostedRecvs> recvs_;
  // Throws when the context is closed or an earlier send or recv failed.
  void check_usable(const coll::CollectiveDesc& d);
};

GlooBackend::GlooBackend(const BackendContext& ctx)
    : rank_(ctx.rank), size_(ctx.size), timeout_(ctx.timeout), store_(ctx.store) {
  const Deadline dl(ctx.timeout);
  // Also gives Gloo's device thread, created here, SIGPIPE blocked for life.
  const SigpipeGuard no_sigpipe;
  try {
    ::gloo::transport::tcp::attr attr;
    // Listen only on the address the job reaches this rank at.
    attr.hostname = ctx.listen_host;
    device_ = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("mci gloo backend: rank {} cannot listen on '{}' for its peers: {}. Set MCI_HOST_ADDR to an "
                    "address of this host that the other ranks can reach.",
                    rank_, ctx.listen_host, e.what()));
  }
  // Nobody leaves init before every rank has connected: a rank that
  // returned and exited at once (the lab does, when the world size is not
  // the one it wants) closed its pairs under a peer still connecting, which
  // then failed with "Connection closed by peer" instead of the lab's
  // message. A rank that cannot connect tells the others at once.
  agree_together(*ctx.store, "gloo/connected", rank_, size_, dl, "connect to its peers through Gloo", [&] {
    try {
      context_ = std::make_shared<RendezvousContext>(rank_, size_);
      // Gloo waits five times its timeout for a pair's first connection
      // (pair.h, waitUntil): a fifth of what is left keeps init within the
      // group's timeout when a peer died after publishing its address.
      context_->setTimeout(std::max(std::chrono::milliseconds(1), dl.wait_left() / 5));
      GlooStore store(ctx.store, kRendezvousPrefix, dl);
      context_->connectFullMesh(store, device_);
      context_->setTimeout(ctx.timeout);
      name_peers(store);
    } catch (const TimeoutError& e) {
      // The store's wait for a peer's addresses: that peer never got this far.
      throw TimeoutError(
          fmt::format("mci gloo backend: rank {} of {} never met all its peers: {}", rank_, size_, e.what()));
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      const bool timed_out = msg.find("imeout") != std::string::npos || dl.expired();
      const std::string text = fmt::format(
          "mci gloo backend: rank {} of {} could not connect to its peers through Gloo "
          "(listening on {}){}: {}",
          rank_, size_, ctx.listen_host, timed_out ? fmt::format("; Timed out waiting {}ms", ctx.timeout.count()) : "",
          msg);
      if (timed_out) throw TimeoutError(text);
      throw PeerError(text, -1);
    }
  });
  sends_ = std::make_unique<PendingSends>(context_, kMaxPendingSendBytes);
  recvs_ = std::make_unique<PostedRecvs>(context_);
}

GlooBackend::~GlooBackend() {
  recvs_.reset();
  if (sends_) sends_->drop();
  sends_.reset();
  context_.reset();  // closes the pairs; the peers see end-of-file
  device_.reset();   // joins Gloo's device thread
}

void GlooBackend::check_usable(const coll::CollectiveDesc& d) {
  if (!context_) {
    throw Error(fmt::format("mci gloo backend: {} on rank {}: the group's Gloo context is closed", describe(d), rank_));
  }
  // An earlier send or recv that failed after its caller returned: this
  // call fails with its error, naming both.
  const auto earlier = [&](OpKind kind, const auto& f) {
    if (!f) return;
    try {
      std::rethrow_exception(f->error);
    } catch (...) {
      rethrow_translated(kind, fmt::format("{} (an earlier {} failed first)", describe(d), f->what), f->budget,
                         nullptr);
    }
  };
  earlier(OpKind::send, sends_->failure());
  earlier(OpKind::recv, recvs_->failure());
}

void GlooBackend::run(const coll::CollectiveDesc& d, const Deadline& dl) {
  // Gloo writes on this thread too; the reaper thread started here inherits it.
  const SigpipeGuard no_sigpipe;
  check_usable(d);
  try {
    dispatch(d, dl);
  } catch (const Error&) {
    throw;
  } catch (...) {
    // A send that failed on the reaper (a timeout there closes every pair)
    // may be why this call failed: say which send it was.
    const auto f = sends_->failure();
    const std::string what = f ? fmt::format("{} (an earlier {} failed first)", describe(d), f->what) : describe(d);
    rethrow_translated(d.kind, what, dl.budget(), &dl);
  }
}

std::uint64_t GlooBackend::post_p2p(const coll::CollectiveDesc& d, const Deadline& dl) {
  if (d.kind != OpKind::recv) {
    run(d, dl);  // a send: buffered, it returns at once
    return 0;
  }
  const SigpipeGuard no_sigpipe;
  check_usable(d);
  try {
    return recvs_->post(d.out, d.bytes(), d.peer, p2p_slot(d), dl, describe(d));
  } catch (const Error&) {
    throw;
  } catch (...) {
    rethrow_translated(d.kind, describe(d), dl.budget(), &dl);
  }
}

bool GlooBackend::p2p_done(std::uint64_t ticket) { return !recvs_ || recvs_->done(ticket); }

void GlooBackend::progress_p2p(std::chrono::milliseconds max_wait, const Deadline& /*dl*/) {
  if (!recvs_) return;
  try {
    recvs_->wait_any(max_wait);
  } catch (...) {
    const auto f = recvs_->failure();
    rethrow_translated(OpKind::recv, f ? f->what : "recv", f ? f->budget : timeout_, nullptr);
  }
}

void GlooBackend::dispatch(const coll::CollectiveDesc& d, const Deadline& dl) {
  // Zero-length collectives move nothing on any rank (count is the same
  // everywhere); a barrier always synchronizes, and a zero-length send still
  // pairs with its recv.
  if (d.count == 0 && !is_p2p(d.kind) && d.kind != OpKind::barrier) return;
  const Op o{d, is_p2p(d.kind) ? 0 : collective_tag(d), dl.wait_left()};
  switch (d.kind) {
    case OpKind::all_reduce: return all_reduce(o);
    case OpKind::broadcast: return broadcast(o);
    case OpKind::reduce: return reduce(o);
    case OpKind::all_gather: return all_gather(o);
    case OpKind::gather: return gather(o);
    case OpKind::scatter: return scatter(o);
    case OpKind::reduce_scatter: return reduce_scatter(o);
    case OpKind::all_to_all: return all_to_all(o);
    case OpKind::barrier: return barrier(o);
    case OpKind::send: return send(o, dl);
    case OpKind::recv: return recv(o);
    default: refuse_kind("gloo", d.kind);  // a kind its row does not list: the front end refused it already
  }
}

void GlooBackend::gloo_allreduce(const void* in, void* out, std::size_t n, DType t, ReduceOp op, const Op& o) {
  with_gloo_type(t, [&](auto tag) {
    using T = decltype(tag);
    ::gloo::AllreduceOptions opts(context_);
    // Without an input Gloo reduces in place in the output.
    if (in != out) opts.setInput(mut<T>(in), n);
    opts.setOutput(static_cast<T*>(out), n);
    opts.setReduceFunction(reduce_fn<T>(t, op));
    opts.setTag(o.tag);
    opts.setTimeout(o.timeout);
    ::gloo::allreduce(opts);
  });
}

void GlooBackend::all_reduce(const Op& o) {
  const auto& d = o.d;
  if (d.dtype == DType::bf16) {
    auto* w = reinterpret_cast<float*>(wide_.get(d.count * sizeof(float)));
    widen_bf16(w, d.in, d.count);
    gloo_allreduce(w, w, d.count, DType::f32, d.op, o);
    if (d.op == ReduceOp::avg) coll::finish_avg(w, d.count, DType::f32, size_);
    narrow_bf16(d.out, w, d.count);
    return;
  }
  gloo_allreduce(d.in, d.out, d.count, d.dtype, d.op, o);
  if (d.op == ReduceOp::avg) coll::finish_avg(d.out, d.count, d.dtype, size_);
}

void GlooBackend::reduce(const Op& o) {
  const auto& d = o.d;
  const bool root = rank_ == d.root;
  auto run = [&](const void* in, void* out, DType t) {
    with_gloo_type(t, [&](auto tag) {
      using T = decltype(tag);
      ::gloo::ReduceOptions opts(context_);
      if (in != out) opts.setInput(mut<T>(in), d.count);
      opts.setOutput(static_cast<T*>(out), d.count);
      opts.setRoot(d.root);
      opts.setReduceFunction(reduce_fn<T>(t, d.op));
      opts.setTag(o.tag);
      opts.setTimeout(o.timeout);
      ::gloo::reduce(opts);
    });
  };
  if (d.dtype == DType::bf16) {
    auto* w = reinterpret_cast<float*>(wide_.get(d.count * sizeof(float)));
    widen_bf16(w, d.in, d.count);
    // Gloo writes the output on every rank: reduce in place in scratch.
    run(w, w, DType::f32);
    if (root) {
      if (d.op == ReduceOp::avg) coll::finish_avg(w, d.count, DType::f32, size_);
      narrow_bf16(d.out, w, d.count);
    }
    return;
  }
  // Gloo writes the output on every rank (ring reduce-scatter, then gather),
  // so a non-root rank reduces into scratch and its buffers stay untouched.
  void* out = root ? d.out : scratch_.get(d.bytes());
  run(d.in, out, d.dtype);
  if (root && d.op == ReduceOp::avg) coll::finish_avg(d.out, d.count, d.dtype, size_);
}

void GlooBackend::broadcast(const Op& o) {
  const auto& d = o.d;
  ::gloo::BroadcastOptions opts(context_);
  // Only the root may name an input; without one Gloo broadcasts in place.
  if (rank_ == d.root && d.in != d.out) opts.setInput(mut<std::uint8_t>(d.in), d.bytes());
  opts.setOutput(static_cast<std::uint8_t*>(d.out), d.bytes());
  opts.setRoot(d.root);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::broadcast(opts);
}

void GlooBackend::all_gather(const Op& o) {
  const auto& d = o.d;
  const std::size_t block = d.bytes();
  ::gloo::AllgatherOptions opts(context_);
  // In place when in is already this rank's block of out: Gloo then takes
  // the block from out.
  if (d.in != bytes_at(d.out, rank_ * block)) opts.setInput(mut<std::uint8_t>(d.in), block);
  opts.setOutput(static_cast<std::uint8_t*>(d.out), block * size_);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::allgather(opts);
}

void GlooBackend::gather(const Op& o) {
  const auto& d = o.d;
  const std::size_t block = d.bytes();
  const void* in = d.in;
  ::gloo::GatherOptions opts(context_);
  if (rank_ == d.root) {
    // Gloo copies the root's input into its block of out with memcpy, which
    // must not be handed the same memory twice: stage an in-place block.
    if (ranges_overlap(in, block, d.out, block * size_)) {
      in = std::memcpy(scratch_.get(block), in, block);
    }
    opts.setOutput(static_cast<std::uint8_t*>(d.out), block * size_);
  }
  opts.setInput(mut<std::uint8_t>(in), block);
  opts.setRoot(d.root);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::gather(opts);
}

void GlooBackend::scatter(const Op& o) {
  const auto& d = o.d;
  const std::size_t block = d.bytes();
  ::gloo::ScatterOptions opts(context_);
  void* out = d.out;
  if (rank_ == d.root) {
    std::vector<std::uint8_t*> blocks(size_);
    for (int r = 0; r < size_; ++r) blocks[r] = bytes_at(d.in, r * block);
    opts.setInputs(blocks, block);
    // In place (out is the root's block of in): the data is already there,
    // and Gloo's local memcpy must not copy a block onto itself.
    if (ranges_overlap(d.in, block * size_, out, block)) out = scratch_.get(block);
  }
  opts.setOutput(static_cast<std::uint8_t*>(out), block);
  opts.setRoot(d.root);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::scatter(opts);
}

void GlooBackend::reduce_scatter(const Op& o) {
  const auto& d = o.d;
  const std::size_t total = d.count * size_;
  const std::size_t first = d.count * rank_;  // this rank's block, in elements
  if (d.dtype == DType::bf16) {
    auto* w = reinterpret_cast<float*>(wide_.get(total * sizeof(float)));
    widen_bf16(w, d.in, total);
    gloo_allreduce(w, w, total, DType::f32, d.op, o);
    if (d.op == ReduceOp::avg) coll::finish_avg(w + first, d.count, DType::f32, size_);
    narrow_bf16(d.out, w + first, d.count);
    return;
  }
  // The whole input reduced into scratch (the input is never written), then
  // this rank's block copied out.
  const std::size_t es = dtype_size(d.dtype);
  std::uint8_t* s = scratch_.get(total * es);
  gloo_allreduce(d.in, s, total, d.dtype, d.op, o);
  std::memcpy(d.out, s + first * es, d.bytes());
  if (d.op == ReduceOp::avg) coll::finish_avg(d.out, d.count, d.dtype, size_);
}

void GlooBackend::all_to_all(const Op& o) {
  const auto& d = o.d;
  const std::size_t total = d.bytes() * size_;
  const void* in = d.in;
  // Gloo sends from in while it receives into out: overlapping buffers (in
  // place) would be overwritten before they are sent.
  if (ranges_overlap(in, total, d.out, total)) in = std::memcpy(scratch_.get(total), in, total);
  ::gloo::AlltoallOptions opts(context_);
  opts.setInput(mut<std::uint8_t>(in), total);
  opts.setOutput(static_cast<std::uint8_t*>(d.out), total);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::alltoall(opts);
}

void GlooBackend::barrier(const Op& o) {
  ::gloo::BarrierOptions opts(context_);
  opts.setTag(o.tag);
  opts.setTimeout(o.timeout);
  ::gloo::barrier(opts);
}

void GlooBackend::send(const Op& o, const Deadline& dl) {
  const auto& d = o.d;
  sends_->post(d.peer, p2p_slot(d), d.in, d.bytes(), dl.budget(), dl, describe(d));
}

void GlooBackend::recv(const Op& o) {
  const auto& d = o.d;
  // Straight into the caller's memory; Gloo matches sends to recvs per slot
  // in posting order, so tags may be received in any order.
  auto buf = context_->createUnboundBuffer(d.out, d.bytes());
  buf->recv(d.peer, p2p_slot(d));
  buf->waitRecv(o.timeout);
}

// ---- errors --------------------------------------------------------------------

void GlooBackend::rethrow_translated(OpKind kind, const std::string& what, std::chrono::milliseconds budget,
                                     const Deadline* dl) {
  const bool p2p = is_p2p(kind);
  std::string msg;
  bool io = false;
  try {
    throw;
  } catch (const ::gloo::IoException& e) {
    msg = e.what();
    io = true;
  } catch (const ::gloo::EnforceNotMet& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    msg = e.what();
  }
  const std::string where = fmt::format("{} on rank {} (backend gloo, {} ranks)", what, rank_, size_);
  // Gloo's timeouts say "Timed out waiting <N>ms for recv/send operation";
  // when one wait times out Gloo closes every pair of the context, so the
  // other waits of this rank see "Application timeout caused pair closure".
  const bool timed_out = msg.find("Timed out waiting") != std::string::npos ||
                         msg.find("Application timeout") != std::string::npos || (dl != nullptr && io && dl->expired());
  if (timed_out) {
    if (p2p) {
      throw TimeoutError(
          fmt::format("Timed out waiting {}ms for {}: the peer never posted the matching {} (same tag, count and "
                      "dtype) or stopped answering. Check the other rank's output. Gloo: {}",
                      budget.count(), where, kind == OpKind::send ? "recv" : "send", msg));
    }
    throw TimeoutError(fmt::format(
        "Timed out waiting {}ms for {}: {} never arrived, stopped answering, or called a different "
        "collective{} (on the gloo backend ranks that disagree on the collective, its count, dtype, "
        "root or op wait for the timeout; the hang report then tells a mismatch from a hang). Check that every rank "
        "calls the same collectives in the same order, and look at the other ranks' output. "
        "Gloo: {}",
        budget.count(), where, rank_list(rank_, size_), size_ > 2 ? " (Gloo does not say which)" : "", msg));
  }
  if (io) {
    const auto note = abort_note();
    int peer = peer_from_message(msg);
    // A peer that broke its connections on purpose left its reason: it is
    // the one to blame when the address did not name anyone.
    if (peer < 0 && note && note->rank != rank_) peer = note->rank;
    const std::string who = peer >= 0 ? fmt::format("rank {}", peer) : std::string("a peer");
    std::string why;
    if (note && note->rank == peer) why = fmt::format(" (rank {} aborted: {})", note->rank, note->reason);
    throw PeerError(fmt::format("{} failed: {} exited, crashed or aborted: its connection to rank {} "
                                "was closed{}. Check that rank's output for the first error. Gloo: {}",
                                where, who, rank_, why, msg),
                    peer);
  }
  throw Error(fmt::format("{} failed inside Gloo: {}", where, msg));
}

// Gloo names a broken pair in its errors by the peer's address, and which
// address depends on a race inside Gloo: the far end of the pair's socket
// (set when the connection is made), or, when the listening side accepts
// before it has read the peer's published address, that published address
// (the port the peer listened on before it connected out instead). Both are
// known here: the published one from the rendezvous, the socket's far end
// from the kernel (Gloo keeps the socket to itself, but the near end of the
// socket of the pair with rank r is that pair's address).
void GlooBackend::name_peers(const GlooStore& store) noexcept {
  try {
    std::map<std::string, int> own;  // this rank's end of each pair -> peer
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (const auto& pair = context_->getPair(r)) own[pair->address().str()] = r;
      // Gloo's rendezvous key for rank r's addresses is "r".
      if (auto published = store.fetched(std::to_string(r))) {
        const ::gloo::transport::tcp::Address a(context_->address_for(std::move(*published), r));
        peer_names_[a.str()] = r;
      }
    }
    // Formatted by Gloo itself, so the text matches its messages exactly.
    const auto end_of = [](int fd, int (*query)(int, sockaddr*, socklen_t*)) -> std::optional<std::string> {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (query(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
      if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return std::nullopt;
      return ::gloo::transport::tcp::Address(reinterpret_cast<const sockaddr*>(&ss), len).str();
    };
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      const auto fd = parse_int(entry.path().filename().string());
      if (!fd) continue;
      const auto near = end_of(static_cast<int>(*fd), ::getsockname);
      const auto it = near ? own.find(*near) : own.end();
      if (it == own.end()) continue;
      if (const auto far = end_of(static_cast<int>(*fd), ::getpeername)) peer_names_[*far] = it->second;
    }
  } catch (const std::exception& e) {
    log::debug("gloo backend: cannot tell how Gloo names the peers: {}", e.what());
  }
}

int GlooBackend::peer_from_message(const std::string& msg) const {
  // The first "[host]:port" in the message (Gloo's "[file.cc:123]" prefix
  // has no "]:").
  for (auto close = msg.find("]:"); close != std::string::npos; close = msg.find("]:", close + 1)) {
    const auto open = msg.rfind('[', close);
    auto end = close + 2;
    while (end < msg.size() && msg[end] >= '0' && msg[end] <= '9') ++end;
    if (open == std::string::npos || end == close + 2) continue;
    const auto it = peer_names_.find(msg.substr(open, end - open));
    return it == peer_names_.end() ? -1 : it->second;
  }
  return -1;
}

std::optional<GlooBackend::AbortNote> GlooBackend::abort_note() {
  try {
    if (!store_->check({kAbortKey})) return std::nullopt;
    const std::string v = to_string(store_->get(kAbortKey, std::chrono::milliseconds(1000)));
    const auto nl = v.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    const auto r = parse_int(v.substr(0, nl));
    if (!r) return std::nullopt;
    return AbortNote{static_cast<int>(*r), v.substr(nl + 1)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void GlooBackend::abort(const std::string& reason) noexcept {
  if (!context_) return;
  try {
    // The first rank to abort leaves its reason where the peers whose
    // connections it is about to break can read it.
    constexpr std::size_t kMaxReason = 600;
    const std::string brief = reason.size() > kMaxReason ? reason.substr(0, kMaxReason) + "..." : reason;
    store_->compare_set(kAbortKey, {}, to_bytes(fmt::format("{}\n{}", rank_, brief)));
  } catch (const std::exception&) {
  }
  try {
    // A hard close (reset) wakes every peer blocked on this rank at once.
    context_->closeConnections();
  } catch (const std::exception& e) {
    log::debug("gloo backend: closing connections on abort: {}", e.what());
  }
  recvs_.reset();  // its waiter stops before the context goes
  sends_->drop();
  sends_.reset();
  context_.reset();
  device_.reset();
}

void GlooBackend::close() noexcept {
  if (!context_) return;
  // Sends this rank returned from must still reach their receivers; wait for
  // them within the group timeout, like any other wait, and say so when the
  // receivers are slow, since the caller only asked to close.
  const Deadline dl(timeout_);
  if (sends_->pending() > 0 && !sends_->flush(Deadline(std::min(timeout_, std::chrono::milliseconds(1000))))) {
    log::warn("gloo backend: rank {} is closing; waiting up to {}ms for {} sends to be received", rank_,
              timeout_.count(), sends_->pending());
    if (!sends_->flush(dl)) {
      log::warn("gloo backend: rank {} closes with {} sends its peers never received", rank_, sends_->pending());
    }
  }
  recvs_.reset();
  sends_->drop();
  sends_.reset();
  // A plain close (no reset): bytes already written still reach the peers.
  context_.reset();
  device_.reset();
}

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(const BackendContext& ctx) { return std::make_unique<GlooBackend>(ctx); }

}  // namespace mci
