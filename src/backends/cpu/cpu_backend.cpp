// mci's own engine on host memory: shared-memory algorithms when every rank
// is on this host; across hosts, hierarchical collectives (shared memory in
// each host, TCP between one rank per host), and the TCP algorithm suite
// where every rank is alone on its host (and for point-to-point). Which
// algorithm runs where is the algorithm
// table's business (collectives/algorithm_table.hpp); this class connects
// the places and keeps the arrival bookkeeping.
#include <charconv>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/device_staging.hpp"
#include "backends/registry.hpp"
#include "collectives/algorithm_table.hpp"
#include "collectives/select.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"
#include "transport/mesh.hpp"
#include "transport/shm/shm_connect.hpp"

namespace mci {

namespace {

// MCI_TRANSPORT: `auto` and `shm` run on shared memory where they can (or
// must) and on the first mesh kind between hosts; any other value is a
// mesh kind (its row in transport/mesh.cpp), with shared memory off.
transport::ShmMode shm_mode(const Settings& s) {
  return s.is({"MCI_TRANSPORT", "auto"})  ? transport::ShmMode::automatic
         : s.is({"MCI_TRANSPORT", "shm"}) ? transport::ShmMode::required
                                          : transport::ShmMode::off;
}
std::string_view mesh_kind(const Settings& s) {
  return s.is({"MCI_TRANSPORT", "auto"}) || s.is({"MCI_TRANSPORT", "shm"})
             ? transport::default_mesh_kind()
             : std::string_view(s.choice("MCI_TRANSPORT"));
}

// MCI_SHM_STREAMING, a rank's own choice: readers do not care how the
// bytes were written.
coll::SharedCopier::Mode copies(const Settings& s) {
  return s.is({"MCI_SHM_STREAMING", "always"})  ? coll::SharedCopier::Mode::streaming
         : s.is({"MCI_SHM_STREAMING", "never"}) ? coll::SharedCopier::Mode::plain
                                                : coll::SharedCopier::Mode::adaptive;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendContext& ctx)
      : store_(ctx.store),
        forced_(coll::parse_forced_algo(ctx.settings.text("MCI_ALGO"))),
        reproducible_(ctx.settings.is({"MCI_REPRODUCIBLE", "1"})),
        copier_(coll::SharedCopier::kSlowRate, copies(ctx.settings)) {
    const Settings& s = ctx.settings;
    const Deadline dl(ctx.timeout);
    check_same_settings(*ctx.store, ctx.rank, ctx.size, s, dl);
    auto setup = transport::connect_shm(*ctx.store, ctx.rank, ctx.size, shm_mode(s), s, dl);
    auto mesh =
        transport::connect_mesh(mesh_kind(s), *ctx.store,
                                transport::MeshOptions{ctx.rank, ctx.size, ctx.listen_host, ctx.session, ctx.token,
                                                       std::max(setup.machine_ranks, 1) <= setup.machine_cpus, s},
                                dl);
    mesh_ = std::move(mesh.transport);
    arrivals_ = mesh.arrivals;
    shm_ = std::move(setup.world);
    hosts_ = coll::HostMap(std::move(setup.hosts));
    if (setup.one_host && shm_) {
      layout_ = coll::Layout::one_host;
    } else if (!hosts_.empty()) {
      layout_ = coll::Layout::hierarchical;
      log::info("rank {}: {} hosts, this one with {} rank(s); collectives are hierarchical", ctx.rank, hosts_.hosts(),
                setup.members.size());
    }
  }

  const char* name() const override { return "cpu"; }

  void prepare(coll::CollectiveDesc& d) override {
    if (d.from_any_source() && d.device.is_cuda()) {
      // A staged p2p call runs to completion inside post_p2p, where no other
      // send or receive moves; an any-source one may wait on any of them.
      throw ConfigError(
          fmt::format("the cpu backend receives from any source into host memory only, and this recv buffer is on {}: "
                      "receive into a host buffer and copy it to the GPU, or pass src=<the sending rank>",
                      d.device.str()));
    }
    d.algo = coll::select_algo(d.kind, d.bytes(), mesh_->size(), forced_, layout_, reproducible_);
  }

  void run(const coll::CollectiveDesc& d, const Deadline& dl) override {
    if (d.device.is_cuda()) {
      const coll::CollectiveDesc h = staging_.stage_in(d, mesh_->rank(), mesh_->size());
      run_host(h, dl);
      staging_.stage_out(d, mesh_->rank(), mesh_->size());
      return;
    }
    run_host(d, dl);
  }

  void note_entry(std::int64_t steady_ns) override { entered_ns_ = steady_ns; }

  std::optional<Lateness> last_arrival() const override {
    // Hierarchical: a rank sees arrivals on its host and, for leaders, the
    // other leaders', on two clocks; not a whole picture, so none.
    if (mesh_->size() == 1 || place_ == coll::Place::hierarchical) return std::nullopt;
    if (place_ == coll::Place::shm) {
      const auto [rank, ns] = shm_->latest_arrival();
      return Lateness{rank, ns - began_ns_};
    }
    if (!arrivals_) return std::nullopt;
    const auto a = arrivals_->latest();
    if (a.rank < 0) return std::nullopt;
    return Lateness{a.rank, a.ns - began_ns_};
  }

  std::uint64_t post_p2p(const coll::CollectiveDesc& d, const Deadline& dl) override {
    if (d.device.is_cuda()) return Backend::post_p2p(d, dl);  // staged: runs to completion here
    const Fingerprint fp = d.fingerprint();
    const auto h = d.kind == OpKind::send ? mesh_->post_send(d.peer, fp, d.in, d.bytes())
                   : d.from_any_source()  ? mesh_->post_recv_any(fp, d.out, d.bytes())
                                          : mesh_->post_recv(d.peer, fp, d.out, d.bytes());
    inflight_.emplace(++next_ticket_, InFlight{h});
    if (h.peer == transport::kAnyPeer) ++any_inflight_;
    return next_ticket_;
  }

  bool p2p_done(std::uint64_t ticket) override {
    auto it = inflight_.find(ticket);
    if (it == inflight_.end()) return true;
    if (!mesh_->done(it->second.handle)) return false;
    if (it->second.handle.peer == transport::kAnyPeer) {
      --any_inflight_;
      sources_[ticket] = it->second.source >= 0 ? it->second.source : mesh_->source(it->second.handle);
    }
    inflight_.erase(it);
    // reap() forgets completed receives, and with them the peer that a
    // receive from any source took: note it first for those still in flight.
    if (any_inflight_ > 0) {
      for (auto& [t, f] : inflight_) {
        if (f.handle.peer == transport::kAnyPeer && f.source < 0 && mesh_->done(f.handle)) {
          f.source = mesh_->source(f.handle);
        }
      }
    }
    mesh_->reap();
    return true;
  }

  int p2p_source(std::uint64_t ticket) override {
    const auto it = sources_.find(ticket);
    if (it == sources_.end()) return -1;
    const int src = it->second;
    sources_.erase(it);
    return src;
  }

  void progress_p2p(std::chrono::milliseconds max_wait, const Deadline& dl) override { mesh_->progress(max_wait, dl); }

  void abort(const std::string& reason) noexcept override {
    if (shm_) shm_->abort(reason);
    mesh_->abort(reason);
  }
  void interrupt(const std::string& reason) noexcept override {
    if (shm_) shm_->interrupt(reason);
    mesh_->interrupt(reason);
  }
  void close() noexcept override { mesh_->close(); }

 private:
  // Settings that decide algorithms and layouts must be the same on every
  // rank; a difference would make ranks wait on different transports.
  // The first rank to arrive sets the reference; each compares its own to
  // it (O(1) per rank: nobody reads everyone's).
  static void check_same_settings(Store& store, int rank, int size, const Settings& s, const Deadline& dl) {
    const std::string& mine = s.agreed();
    const std::string claim = fmt::format("{}\n{}", rank, mine);
    std::string error;
    const std::string first = to_string(store.compare_set("cpu/settings/reference", {}, to_bytes(claim)));
    const auto nl = first.find('\n');
    if (nl == std::string::npos || first.substr(nl + 1) != mine) {
      // The lower rank first, whichever arrived first: the same text in
      // every run.
      int other = -1;
      std::from_chars(first.data(), first.data() + std::min(nl, first.size()), other);
      const std::string theirs = nl == std::string::npos ? first : first.substr(nl + 1);
      const bool mine_first = other < 0 || rank < other;
      const auto a = mine_first ? std::pair{rank, mine} : std::pair{other, theirs};
      const auto b = mine_first ? std::pair{other, theirs} : std::pair{rank, mine};
      error = fmt::format(
          "the ranks disagree on mci's settings: rank {} has {}, rank {} has {}. Set {} the same on every "
          "rank (or leave them unset everywhere).",
          a.first, a.second, b.first, b.second, Settings::agreed_names(SettingUses{true, true}));
    }
    const GroupVerdict v =
        agree(store, "cpu/settings", rank, size, error.empty() ? Verdict::value("") : Verdict::error(error), dl);
    if (!error.empty()) throw ConfigError(error);
    if (!v.ok()) throw ConfigError(v.failure);
  }

  void run_host(const coll::CollectiveDesc& d, const Deadline& dl) {
    place_ = coll::place_of(d.algo);
    // One host shares the monotonic clock: no extra clock read. Across
    // hosts only the wall clock compares.
    began_ns_ = place_ == coll::Place::shm ? entered_ns_ : wall_ns();
    if (place_ != coll::Place::shm && arrivals_) arrivals_->begin_op(began_ns_);
    if (place_ != coll::Place::mesh && shm_) shm_->begin_op(entered_ns_);
    coll::run_algorithm(coll::Places{mesh_.get(), shm_.get(), &hosts_, &packed_, &copier_}, d, dl, scratch_);
  }

  // Wall clock, comparable between processes (and, with NTP, hosts).
  static std::int64_t wall_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  std::shared_ptr<Store> store_;  // outlives mesh_, which reads peers' addresses from it
  std::optional<Algo> forced_;
  bool reproducible_;  // MCI_REPRODUCIBLE: reductions in rank order (select.hpp)
  std::unique_ptr<transport::Transport> mesh_;
  transport::ArrivalLog* arrivals_ = nullptr;  // mesh_'s, when it keeps one
  std::unique_ptr<transport::ShmWorld> shm_;
  DeviceStaging staging_;
  coll::Layout layout_ = coll::Layout::flat;
  coll::HostMap hosts_;                    // hierarchical layout: which rank is on which host
  coll::Place place_ = coll::Place::mesh;  // where the last operation ran
  coll::Scratch scratch_;
  coll::Scratch packed_;
  coll::SharedCopier copier_;
  struct InFlight {
    transport::OpHandle handle;
    int source = -1;  // a receive from any source: its peer, once noted before a reap()
  };
  std::map<std::uint64_t, InFlight> inflight_;
  std::size_t any_inflight_ = 0;          // of inflight_, receives from any source
  std::map<std::uint64_t, int> sources_;  // completed ones, until p2p_source() asks
  std::uint64_t next_ticket_ = 0;
  std::int64_t began_ns_ = 0;
  std::int64_t entered_ns_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendContext& ctx) { return std::make_unique<CpuBackend>(ctx); }

}  // namespace mci
