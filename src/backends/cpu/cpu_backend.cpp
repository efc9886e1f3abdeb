// mci's own engine on host memory: shared-memory algorithms when every rank
// is on this host; across hosts, hierarchical all-reduce (shared memory in
// each host, TCP between leaders) and the TCP algorithm suite for the rest
// (and for point-to-point).
#include <map>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.hpp"
#include "backends/cpu/device_staging.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/hierarchical.hpp"
#include "collectives/select.hpp"
#include "collectives/shm_algorithms.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "mci/errors.hpp"
#include "transport/shm/shm_connect.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace mci {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendContext& ctx) {
    if (auto a = env_str("MCI_ALGO")) {
      auto parsed = parse_algo(*a);
      if (!parsed) {
        throw ConfigError(fmt::format("MCI_ALGO='{}' is not an algorithm: use auto, ring, "
                                      "recursive_doubling (rd), direct, tree or hierarchical (hier)",
                                      *a));
      }
      forced_ = *parsed;
    }
    transport::ShmMode mode = transport::ShmMode::automatic;
    if (auto t = env_str("MCI_TRANSPORT")) {
      if (*t == "shm") {
        mode = transport::ShmMode::required;
      } else if (*t == "tcp") {
        mode = transport::ShmMode::off;
      } else if (*t != "auto" && !t->empty()) {
        throw ConfigError(fmt::format("MCI_TRANSPORT='{}' is not a transport: use auto, shm or tcp", *t));
      }
    }
    const std::size_t buffer = static_cast<std::size_t>(
        env_int("MCI_SHM_BUFFER_BYTES", "MCI_SHM_BUFFER_BYTES").value_or(static_cast<long long>(kShmBufferBytes)));
    if (buffer < 4096 || buffer > (1u << 30)) {
      throw ConfigError(fmt::format("MCI_SHM_BUFFER_BYTES={} is out of range: use 4096 .. 1 GiB", buffer));
    }
    if (auto how = env_str("MCI_SHM_STREAMING")) {
      // A rank's own choice: readers do not care how the bytes were written.
      if (*how == "always") {
        copier_ = coll::SharedCopier(coll::SharedCopier::kSlowRate, coll::SharedCopier::Mode::streaming);
      } else if (*how == "never") {
        copier_ = coll::SharedCopier(coll::SharedCopier::kSlowRate, coll::SharedCopier::Mode::plain);
      } else if (*how != "auto" && !how->empty()) {
        throw ConfigError(fmt::format("MCI_SHM_STREAMING='{}': use auto, always or never", *how));
      }
    }
    // Read again by the shared-memory waits; checked here so a bad value is
    // an error at init, not a silent fallback to TCP.
    microseconds_setting("MCI_SHM_SPIN_US", 50);
    microseconds_setting("MCI_SHM_YIELD_US", 200);
    const Deadline dl(ctx.timeout);
    check_same_settings(*ctx.store, ctx.rank, ctx.size, mode, buffer, dl);
    transport_ = transport::connect_tcp_mesh(*ctx.store, ctx.rank, ctx.size, ctx.listen_host, ctx.session,
                                             ctx.token, dl);
    auto setup = transport::connect_shm(*ctx.store, ctx.rank, ctx.size, mode, buffer, dl);
    // Spin on the sockets before sleeping only while this host's ranks each
    // have a core (with more ranks than cores a spinner steals the time of
    // the rank it waits for).
    const int local = std::max(setup.machine_ranks, 1);
    const long long spin_us = microseconds_setting("MCI_TCP_SPIN_US", 50);
    if (local <= setup.machine_cpus) {
      transport_->set_spin(std::chrono::microseconds(spin_us));
    }
    shm_ = std::move(setup.world);
    leaders_ = std::move(setup.leaders);
    if (setup.one_host && shm_) {
      layout_ = coll::Layout::one_host;
    } else if (!leaders_.empty()) {
      layout_ = coll::Layout::hierarchical;
      log::info("rank {}: {} hosts, this one with {} rank(s); all_reduce is hierarchical", ctx.rank,
                leaders_.size(), setup.members.size());
    }
  }

  const char* name() const override { return "cpu"; }

  // A wait-policy setting in microseconds, 0 .. 1 s.
  static long long microseconds_setting(const char* name, long long fallback) {
    const long long v = env_int(name, name).value_or(fallback);
    if (v < 0 || v > 1'000'000) {
      throw ConfigError(fmt::format("{}={} is out of range: use 0 .. 1000000 (microseconds)", name, v));
    }
    return v;
  }

  // Settings that decide algorithms and layouts must be the same on every
  // rank; a difference would make ranks wait on different transports.
  void check_same_settings(Store& store, int rank, int size, transport::ShmMode mode, std::size_t buffer,
                           const Deadline& dl) {
    const std::string mine = fmt::format("MCI_ALGO={} MCI_TRANSPORT={} MCI_SHM_BUFFER_BYTES={}",
                                         algo_name(forced_),
                                         mode == transport::ShmMode::required ? "shm"
                                         : mode == transport::ShmMode::off    ? "tcp"
                                                                              : "auto",
                                         buffer);
    store.set(fmt::format("cpu/settings/{}", rank), to_bytes(mine));
    for (int r = 0; r < size; ++r) {
      const std::string theirs =
          to_string(store.get(fmt::format("cpu/settings/{}", r), std::chrono::milliseconds(std::max(dl.poll_ms(), 1))));
      if (theirs != mine) {
        throw ConfigError(fmt::format("the ranks disagree on mci's settings: rank {} has {}, rank {} has {}. Set "
                                      "MCI_ALGO, MCI_TRANSPORT and MCI_SHM_BUFFER_BYTES the same on every rank "
                                      "(or leave them unset everywhere).",
                                      rank, mine, r, theirs));
      }
    }
  }

  void prepare(coll::CollectiveDesc& d) override {
    d.algo = coll::select_algo(d.kind, d.bytes(), transport_->size(), forced_, layout_);
  }

  void run(const coll::CollectiveDesc& d, const Deadline& dl) override {
    if (d.device.is_cuda()) {
      const coll::CollectiveDesc h = staging_.stage_in(d, transport_->rank(), transport_->size());
      run_host(h, dl);
      staging_.stage_out(d, transport_->rank(), transport_->size());
      return;
    }
    run_host(d, dl);
  }

  void note_entry(std::int64_t steady_ns) override { entered_ns_ = steady_ns; }

  void run_host(const coll::CollectiveDesc& d, const Deadline& dl) {
    on_shm_ = d.algo == Algo::shm || d.algo == Algo::shm_direct;
    on_hier_ = d.algo == Algo::hierarchical;
    if (on_hier_) {
      began_ns_ = wall_ns();
      transport_->begin_op(began_ns_);
      if (shm_) shm_->begin_op(entered_ns_);
      coll::hierarchical_all_reduce(coll::HierCtx{*transport_, shm_.get(), leaders_, d, dl, scratch_, copier_});
      return;
    }
    if (on_shm_) {
      // One host: the monotonic clock is shared, no extra clock read.
      began_ns_ = entered_ns_;
      shm_->begin_op(began_ns_);
      coll::run_shm_collective(coll::ShmCtx{*shm_, d, dl, scratch_, copier_});
      return;
    }
    began_ns_ = wall_ns();  // hosts share only the wall clock
    transport_->begin_op(began_ns_);
    coll::run_collective(coll::Ctx{*transport_, d, dl, scratch_});
  }

  std::optional<Lateness> last_arrival() const override {
    // Hierarchical: a rank sees arrivals on its host and, for leaders, the
    // other leaders', on two clocks; not a whole picture, so none.
    if (transport_->size() == 1 || on_hier_) return std::nullopt;
    if (on_shm_) {
      const auto [rank, ns] = shm_->latest_arrival();
      return Lateness{rank, ns - began_ns_};
    }
    const auto a = transport_->latest();
    if (a.rank < 0) return std::nullopt;
    return Lateness{a.rank, a.ns - began_ns_};
  }

  std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline& dl) override {
    if (d.device.is_cuda()) return Backend::post_p2p(d, dl);  // staged: runs to completion here
    const Fingerprint fp = d.fingerprint();
    const auto h = d.kind == OpKind::send ? transport_->post_send(d.root, fp, d.in, d.bytes())
                                          : transport_->post_recv(d.root, fp, d.out, d.bytes());
    inflight_.emplace(++next_ticket_, h);
    return next_ticket_;
  }

  bool p2p_done(std::uint64_t ticket) override {
    auto it = inflight_.find(ticket);
    if (it == inflight_.end()) return true;
    if (!transport_->done(it->second)) return false;
    inflight_.erase(it);
    transport_->reap();
    return true;
  }

  void progress_p2p(std::chrono::milliseconds max_wait, const Deadline& dl) override {
    transport_->progress(max_wait, dl);
  }

  void abort(const std::string& reason) noexcept override {
    if (shm_) shm_->abort(reason);
    transport_->abort(reason);
  }
  void close() noexcept override { transport_->close(); }

 private:
  Algo forced_ = Algo::none;
  // Per-rank shared-memory staging: 4 buffers of this size (two staging, two
  // result), whatever the message size.
  static constexpr std::size_t kShmBufferBytes = 512 * 1024;

  std::unique_ptr<transport::TcpTransport> transport_;
  std::unique_ptr<transport::ShmWorld> shm_;
  DeviceStaging staging_;
  coll::Layout layout_ = coll::Layout::flat;
  std::vector<int> leaders_;  // hierarchical layout: the lowest rank of each host
  bool on_shm_ = false;
  bool on_hier_ = false;
  coll::Scratch scratch_;
  coll::SharedCopier copier_;
  std::map<std::uint64_t, transport::OpHandle> inflight_;
  std::uint64_t next_ticket_ = 0;
  std::int64_t began_ns_ = 0;
  std::int64_t entered_ns_ = 0;

  // Wall clock, comparable between processes (and, with NTP, hosts).
  static std::int64_t wall_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendContext& ctx) {
  return std::make_unique<CpuBackend>(ctx);
}

}  // namespace mci
