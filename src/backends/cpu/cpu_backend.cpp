// mci's own engine on host memory: the algorithm suite over the TCP mesh.
#include <map>

#include <fmt/format.h>

#include "backends/backend.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/select.hpp"
#include "common/env.hpp"
#include "mci/errors.hpp"
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
                                      "recursive_doubling (rd), direct or tree",
                                      *a));
      }
      forced_ = *parsed;
    }
    transport_ = transport::connect_tcp_mesh(*ctx.store, ctx.rank, ctx.size, ctx.listen_host,
                                             ctx.session, ctx.token, Deadline(ctx.timeout));
  }

  const char* name() const override { return "cpu"; }

  void prepare(coll::CollectiveDesc& d) override {
    if (!is_p2p(d.kind)) d.algo = coll::select_algo(d.kind, d.bytes(), transport_->size(), forced_);
  }

  void run(const coll::CollectiveDesc& d, const Deadline& dl) override {
    began_ns_ = wall_ns();
    transport_->begin_op(began_ns_);
    coll::run_collective(coll::Ctx{*transport_, d, dl, scratch_});
  }

  std::optional<Lateness> last_arrival() const override {
    const auto a = transport_->latest();
    if (a.rank < 0 || transport_->size() == 1) return std::nullopt;
    return Lateness{a.rank, a.ns - began_ns_};
  }

  std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline&) override {
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

  void abort(const std::string& reason) noexcept override { transport_->abort(reason); }
  void close() noexcept override { transport_->close(); }

 private:
  Algo forced_ = Algo::none;
  std::unique_ptr<transport::TcpTransport> transport_;
  coll::Scratch scratch_;
  std::map<std::uint64_t, transport::OpHandle> inflight_;
  std::uint64_t next_ticket_ = 0;
  std::int64_t began_ns_ = 0;

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
