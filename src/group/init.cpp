// init_process_group: read the job's coordinates, reach (or host) the store,
// check that the ranks agree with each other, and connect the backend.
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "backends/registry.hpp"
#include "common/auth.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/net_interfaces.hpp"
#include "common/socket.hpp"
#include "group/group_impl.hpp"
#include "group/job_coordinates.hpp"
#include "group/join.hpp"
#include "group/tick_clock.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "store/all_ranks.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"
#include "transport/mesh.hpp"

namespace mci {

namespace {

struct Coordinates {
  int rank = -1;
  int world = -1;
  int local_rank = 0;
  int local_world = 1;
  std::string host;
  int port = 0;
  std::string method;  // for messages
};

Coordinates from_env() {
  const JobCoordinates j = job_coordinates(process_env());
  Coordinates c;
  c.method = "env://";
  c.rank = j.rank;
  c.world = j.world;
  c.local_rank = j.local_rank;
  c.local_world = j.local_world;
  c.host = j.host;
  c.port = j.port;
  if (j.source != "RANK/WORLD_SIZE") {
    log::info("rank {} of {} from {}'s variables; the store at {}:{}", j.rank, j.world, j.source, j.host, j.port);
  }
  return c;
}

Coordinates from_tcp(const InitOptions& o) {
  Coordinates c;
  c.method = o.init_method;
  const std::string rest = o.init_method.substr(6);
  const auto colon = rest.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : parse_int(rest.substr(colon + 1));
  if (colon == std::string::npos || colon == 0 || !port) {
    throw ConfigError(fmt::format("init_method '{}' is malformed: use tcp://HOST:PORT", o.init_method));
  }
  c.host = rest.substr(0, colon);
  if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']') c.host = c.host.substr(1, c.host.size() - 2);
  c.port = checked_port(*port, o.init_method);
  c.rank = o.rank;
  c.world = o.world_size;
  return c;
}

void check_explicit(const Coordinates& c) {
  if (c.world < 1) {
    throw ConfigError(
        fmt::format("Error initializing mci using {}: world_size={} is not a valid "
                    "number of processes; pass world_size >= 1",
                    c.method, c.world));
  }
  if (c.rank < 0 || c.rank >= c.world) {
    throw ConfigError(
        fmt::format("Error initializing mci using {}: rank={} is outside [0, "
                    "world_size={})",
                    c.method, c.rank, c.world));
  }
}

// Each rank claims its number and states the world size; a second process
// with the same RANK, or a different WORLD_SIZE, is caught here instead of
// producing a job that hangs or computes garbage.
void check_agreement(Store& s, const Coordinates& c) {
  // host and pid, plus a nonce so two groups in one process are told apart.
  const auto nonce = auth::random_nonce();
  const records::RankClaim me{host_name(), ::getpid(), fmt::format("{:02x}{:02x}", nonce[0], nonce[1])};
  const std::string mine = records::encode_rank_claim(me);
  const std::string key = keys::rank_claim(c.rank);
  const std::string claimed = to_string(s.compare_set(key, {}, to_bytes(mine)));
  if (claimed != mine) {
    std::string other;
    try {
      other = records::describe(records::decode_rank_claim(claimed, "store key '" + key + "'"));
    } catch (const records::RecordError& e) {
      other = e.what();
    }
    throw ConfigError(
        fmt::format("RANK {} is used by two processes: this one ({}) and {}. Each process of a job needs its "
                    "own RANK from 0 to WORLD_SIZE-1 (check the launcher or your srun/export commands).",
                    c.rank, records::describe(me), other));
  }
  const std::string w = std::to_string(c.world);
  const StoreValue world = s.compare_set(keys::kWorldSize, {}, to_bytes(w));
  if (to_string(world) != w) {
    throw ConfigError(
        fmt::format("WORLD_SIZE disagrees between processes: rank {} has {}, an "
                    "earlier rank has {}. Every process must get the same WORLD_SIZE.",
                    c.rank, w, to_string(world)));
  }
}

// Every rank checks in with its verdict, so a rank whose checks fail takes
// the others down at once instead of leaving them waiting for it until the
// timeout.
void check_in(Store& s, const Coordinates& c, const Deadline& dl) {
  agree_together(s, "checkin", c.rank, c.world, dl, "join the group", [&] { check_agreement(s, c); });
}

}  // namespace

bool backend_available(const std::string& name) {
  const BackendEntry* b = find_backend(name);
  return b && b->built;
}

bool launched_as_a_job() { return has_job_variables(process_env()); }

namespace {

// "restart3/" for the fourth start of a job whose launcher restarts it (it
// sets TORCHELASTIC_RESTART_COUNT, as torchrun does), "" for the first.
std::string restart_scope(const EnvLookup& env) {
  const auto v = env("TORCHELASTIC_RESTART_COUNT");
  const auto n = v ? parse_int(*v) : std::nullopt;
  return n && *n > 0 ? fmt::format("restart{}/", *n) : std::string();
}

}  // namespace

InitOptions options_through_store(const std::string& host, int port, const std::string& token, int rank, int world_size,
                                  std::chrono::milliseconds timeout) {
  InitOptions o;
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = timeout;
  o.token = token;
  o.store = StoreAddress{host, port, token}.connect(timeout, timeout);
  return o;
}

namespace {

// A row of the table as the public API shows it.
BackendInfo info_of(const BackendEntry& b) {
  return BackendInfo{std::string(b.name), std::string(b.what), b.built, std::string(b.needs), b.caps};
}

}  // namespace

std::vector<SettingInfo> list_settings() {
  std::vector<SettingInfo> out;
  for (const auto& r : setting_rows()) {
    std::string accepts;
    switch (r.kind) {
      case SettingKind::integer: accepts = fmt::format("{} .. {} ({})", r.min, r.max, r.unit); break;
      case SettingKind::choice: accepts = choices_text(r, false, transport::transport_choices()); break;
      case SettingKind::text: accepts = "text"; break;
      case SettingKind::flag: accepts = "set or unset"; break;
    }
    std::vector<std::string> choices;
    for (const auto& c : choices_of(r, transport::transport_choices())) choices.emplace_back(c.name);
    out.push_back(SettingInfo{std::string(r.name), std::string(r.fallback), accepts, std::move(choices), r.ranks_agree,
                              settable(r)});
  }
  return out;
}

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> out;
  for (const auto& b : backend_table()) out.push_back(info_of(b));
  return out;
}

std::optional<BackendInfo> find_backend_info(const std::string& name) {
  const BackendEntry* b = find_backend(name);
  if (!b) return std::nullopt;
  return info_of(*b);
}

namespace {

// A process's start in the job: its coordinates and the group's origin.
// A replacement never hosts the store (the launcher that started it does).
struct JobStart {
  GroupOrigin origin;
  Coordinates c;
};

// Where peers reach this rank: MCI_HOST_ADDR; else the interface the user
// names (MCI_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME); else the
// address toward the store, unless that is a loopback address while ranks
// run on other hosts (a loopback address is useless to them): then the
// first interface that is up and not loopback.
// Of the interfaces `take` accepts, the first of the store's family (IPv4
// or IPv6), else the first; nullptr when it accepts none.
template <typename Take>
const NetInterface* first_interface(const std::vector<NetInterface>& up, bool store_v6, Take take) {
  const NetInterface* pick = nullptr;
  for (const auto& i : up) {
    if (take(i) && (!pick || (pick->ipv6 != store_v6 && i.ipv6 == store_v6))) pick = &i;
  }
  return pick;
}

std::string reached_at(const Settings& settings, const std::string& toward_store, const Coordinates& c) {
  if (std::string addr = settings.text("MCI_HOST_ADDR"); !addr.empty()) return addr;
  const bool store_v6 = toward_store.find(':') != std::string::npos;
  const EnvLookup env = process_env();
  std::string variable, spec;
  if (const std::string mine = settings.text("MCI_SOCKET_IFNAME"); !mine.empty()) {
    variable = "MCI_SOCKET_IFNAME";
    spec = mine;
  } else if (const auto nccl = env("NCCL_SOCKET_IFNAME"); nccl && !nccl->empty()) {
    variable = "NCCL_SOCKET_IFNAME";
    spec = *nccl;
  } else if (const auto gloo = env("GLOO_SOCKET_IFNAME"); gloo && !gloo->empty()) {
    variable = "GLOO_SOCKET_IFNAME";
    spec = "=" + *gloo;  // gloo takes exact names
  }
  const std::vector<NetInterface> up = list_interfaces();
  if (!spec.empty()) {
    const InterfaceFilter f = parse_interface_filter(spec);
    // An exclusion list never picks loopback unless it names lo itself.
    const NetInterface* pick = first_interface(up, store_v6, [&](const NetInterface& i) {
      return f.matches(i.name) && !(f.exclude && i.loopback);
    });
    if (!pick) {
      throw ConfigError(
          fmt::format("{}={} matches no interface of this host that is up (rank {}; up: {}): name one of "
                      "them, or unset {}",
                      variable, spec, c.rank, interfaces_text(up), variable));
    }
    log::info("rank {}: peers reach it at {} (interface {}, {}={})", c.rank, pick->address, pick->name, variable, spec);
    return pick->address;
  }
  const bool other_hosts = c.local_world < c.world;
  if (!toward_store.empty() && !(other_hosts && is_loopback_address(toward_store))) return toward_store;
  if (!other_hosts) return toward_store.empty() ? "127.0.0.1" : toward_store;
  const NetInterface* pick = first_interface(up, store_v6, [](const NetInterface& i) { return !i.loopback; });
  if (!pick) {
    log::warn(
        "rank {}: it reaches the store over loopback ({}) and this host has no other interface up: ranks on "
        "other hosts cannot reach it; set MCI_HOST_ADDR or MCI_SOCKET_IFNAME",
        c.rank, toward_store);
    return toward_store.empty() ? "127.0.0.1" : toward_store;
  }
  log::info(
      "rank {}: it reaches the store over loopback ({}) but the job has ranks on other hosts: peers reach it at "
      "{} (interface {}); set MCI_SOCKET_IFNAME to choose another",
      c.rank, toward_store, pick->address, pick->name);
  return pick->address;
}

JobStart start_job(const InitOptions& opts, bool replacement) {
  // Before anything connects: an unknown or unbuilt backend fails here.
  require_backend(opts.backend);
  if (opts.timeout.count() <= 0) {
    throw ConfigError(fmt::format("timeout must be positive (got {}ms)", opts.timeout.count()));
  }

  Coordinates c;
  if (opts.store) {
    c.method = "a user store";
    c.rank = opts.rank;
    c.world = opts.world_size;
    check_explicit(c);
  } else if (opts.init_method == "env://") {
    c = from_env();
  } else if (opts.init_method.rfind("tcp://", 0) == 0) {
    c = from_tcp(opts);
    check_explicit(c);
  } else {
    throw ConfigError(
        fmt::format("init_method '{}' is not supported: use env:// or tcp://HOST:PORT", opts.init_method));
  }

  const SettingSource source(opts.settings, process_env());
  const Settings settings = resolve_group_settings(opts, source);
  const std::string token = job_token(opts, settings);
  const bool launcher_hosts_store = settings.flag("MCI_STORE_HOSTED");  // mcirun hosts the store, rank 0 must not
  fr_dump_place(settings, source);  // a bad combination fails here, before the store is reached
  if (const auto level = source.raw("MCI_LOG_LEVEL"); level && !level->empty() && !log::level_named(*level)) {
    log::warn("MCI_LOG_LEVEL='{}' is not a log level: use {}; logging at warn", *level,
              choices_text(setting("MCI_LOG_LEVEL"), false));
  }
  // Said once per job, by rank 0, where nobody said it already: mcirun makes
  // a token for a single-node job and warns itself about a multi-node one.
  if (token.empty() && !opts.store && !launcher_hosts_store && c.rank == 0 && !replacement) {
    log::warn(
        "MCI_JOB_TOKEN is not set: this job's store and data connections are not authenticated. Export the "
        "same MCI_JOB_TOKEN on every rank (e.g. MCI_JOB_TOKEN=$(openssl rand -hex 16)) to authenticate them; "
        "mcirun makes one for a single-node job");
  }
  GroupOrigin origin;
  origin.opts = opts;
  origin.base = opts.store;
  if (!origin.base) {
    // mcirun hosts the store for its job; otherwise rank 0 does, like torch.
    if (c.rank == 0 && !launcher_hosts_store && !replacement) {
      // On every address when the job spans hosts, as torch's TCPStore
      // listens: MASTER_ADDR may resolve to 127.0.1.1 here (Debian's
      // /etc/hosts) and to the real address elsewhere.
      origin.hosted = std::make_shared<StoreServer>(
          StoreServerOptions{c.local_world < c.world ? std::string() : c.host, c.port, token});
    }
    origin.base = StoreAddress{c.host, c.port, token}.connect(opts.timeout, opts.timeout);
  }
  // Peers reach this rank on the address it reaches the store from (its
  // own or the user's, when that is a TcpStore), or the one the user names.
  std::string toward_store;
  if (auto* tcp = dynamic_cast<TcpStore*>(origin.base.get())) toward_store = tcp->local_address();
  origin.listen_host = reached_at(settings, toward_store, c);
  origin.base->set_timeout(opts.timeout);

  // Each start of a restarted job (mcirun --max-restarts, torchrun) counts
  // apart: the ranks of a failed start that arrived must not count toward
  // the next.
  origin.lineage = "mci/" + restart_scope(process_env()) + opts.group_name;
  return JobStart{std::move(origin), c};
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& opts) {
  const JobStart s = start_job(opts, false);
  return join_group(s.origin, s.origin.lineage, Place{s.c.rank, s.c.world, s.c.local_rank, s.c.local_world});
}

std::shared_ptr<ProcessGroup> join_running_group(const InitOptions& opts) {
  const JobStart s = start_job(opts, true);
  return wait_to_join(s.origin, s.c.local_rank);
}

bool is_replacement() { return process_env()("MCI_REPLACEMENT").has_value(); }

namespace {

// A completed init is completed on every rank, and a failed one failed on
// every rank: each returns only once every rank is done with what init asks
// of the store. Without a launcher, rank 0's process hosts the store, and a
// program may exit as soon as init returns (torch's test harness does): the
// others, still reading their peers' addresses, then lost the store (10
// jobs of 10 at world 2). And a rank lost at the end of init must not leave
// some ranks with a group and the others with an error: the death
// certificate (finished/failed) fails every rank's init at once.
void finish_together(Store& store, const Place& place, std::chrono::milliseconds timeout) {
  const Deadline dl(timeout);
  agree_together(store, "finished", place.rank, place.world, dl, "finish init_process_group", [] {});
  if (place.world == 1) return;
  // Rank 0 leaves last: the others still read the agreement's answer, and
  // rank 0's process may host the store.
  if (place.rank != 0) {
    try {
      store.set(fmt::format("finished/left/{}", place.rank), to_bytes("1"));
    } catch (const PeerError&) {
      // Rank 0 left as this word arrived: nothing of init is left to read.
    }
    return;
  }
  // One request while every rank leaves; stopped by a death certificate
  // ("finished/failed": a rank lost after the agreement), which is final
  // only for a rank that had not said it left (one that left may exit at
  // once). Waiting the timeout for such a rank held the whole new group of
  // a shrink, once, for its timeout (the fault matrix's SIGKILL inside the
  // shrink).
  const auto poll = std::chrono::milliseconds(2) * std::max(1, place.world / 64);
  try {
    for (bool stopped = false;; stopped = true) {
      if (stopped) std::this_thread::sleep_for(std::min(poll, dl.wait_left()));
      // The ended and the given up first, then who left: a rank that left
      // and then ended shows as left in the read after.
      std::set<int> gone;
      if (stopped) {
        const std::string failed = to_string(store.get("finished/failed", dl.wait_left()));
        gone = lost_ranks(failed);
        gone.merge(gave_up_ranks(failed));
      }
      const auto left = store.get_range("finished/left", 1, place.world - 1, "finished/failed", dl.wait_left());
      if (std::all_of(left.begin(), left.end(), [](const auto& v) { return v.has_value(); })) return;
      if (!stopped) continue;
      bool waiting = false;
      for (std::size_t i = 0; i < left.size() && !waiting; ++i) {
        waiting = !left[i] && !gone.count(static_cast<int>(i) + 1);
      }
      if (!waiting) {
        log::info("rank 0: a rank ended just after init's agreement; its first operation will say who");
        return;
      }
      if (dl.expired()) throw TimeoutError("finish init_process_group: not every rank said it left");
    }
  } catch (const TimeoutError&) {
    // A rank lost just after the agreement: the group exists on every rank
    // that is alive, and its first operation will say who is missing.
    log::info("rank 0: not every rank said it left init within the timeout; going on");
  }
}

}  // namespace

namespace {
// Every agreement a group's forming runs (agree(), store/all_ranks.hpp): each
// has a death certificate, so a rank lost at any of them stops the others.
// (exchange_verdicts and run_together read the same key: "shm/where" and the
// nccl and mpi backends' rendezvous.)
constexpr const char* kInitAgreements[] = {"checkin",        "shm/where", "shm/mapped", "cpu/settings",
                                           "gloo/connected", "nccl/gpu",  "mpi/world",  "finished"};

StoreValue lost_record(int rank) { return to_bytes(fmt::format(";lost {}", rank)); }

// The session of a group's generation under `root` (join_group's arrivals
// count the generations there).
std::string session_of(const std::string& root, std::int64_t generation) {
  return fmt::format("{}/{}", root, generation);
}
}  // namespace

std::set<int> certified_gone(Store& group) {
  // An append of nothing reads the list without waiting for it to exist.
  return records::decode_gone(to_string(group.append(keys::kGone, {})), "store key 'gone'");
}

void certify_lost_member(Store& base, const std::string& root, int place_rank) {
  for (const char* topic : kInitAgreements) {
    (void)base.append(fmt::format("{}/{}/failed", session_of(root, 0), topic), lost_record(place_rank));
  }
}

std::shared_ptr<ProcessGroup> join_group(const GroupOrigin& origin, const std::string& root, const Place& place) {
  const InitOptions& opts = origin.opts;
  const BackendEntry& entry = require_backend(opts.backend);
  const SettingSource source(opts.settings, process_env());
  const Settings settings =
      resolve_group_settings(opts, source, SettingUses{entry.caps.mci_algorithms, entry.caps.mci_transports});
  // Made first: it measures the counter's rate while the ranks meet, so the
  // first collectives already read the counter.
  auto clock = std::make_unique<TickClock>(settings.is({"MCI_CLOCK", "auto"}) && TickClock::counter_usable());

  // A generation number keeps successive groups of the same name apart: all
  // ranks of one generation arrive before any rank can arrive for the next,
  // because init does not return until every rank has connected.
  auto named = std::make_shared<PrefixStore>(root, origin.base);
  const std::int64_t arrival = named->add("arrivals", 1);
  const std::int64_t generation = (arrival - 1) / place.world;
  const std::string session = session_of(root, generation);
  auto store = std::make_shared<PrefixStore>(session, origin.base);
  // Death certificates, written by the store when this process's connection
  // ends: a rank lost while the others meet stops their check-in at once
  // (";lost R" after any failure already there), and shrink() reads "gone"
  // to know who is lost without waiting for a timeout. Stores other than
  // mci's cannot: their groups cannot shrink.
  // Every agreement of init has one (agree() reads it): a rank lost inside
  // the backend's or the transport's setup, not only at the check-in, stops
  // the others at once (a rank killed inside a shrink's new group used to
  // hold the survivor for its whole timeout at cpu/settings).
  bool certified = true;
  for (const char* topic : kInitAgreements) {
    certified = certified && store->append_on_close(fmt::format("{}/failed", topic), lost_record(place.rank));
  }
  certified = certified && store->append_on_close(keys::kGone, to_bytes(records::encode_gone(place.rank)));
  Coordinates c;
  c.rank = place.rank;
  c.world = place.world;
  check_in(*store, c, Deadline(opts.timeout));

  BackendContext ctx;
  ctx.rank = place.rank;
  ctx.size = place.world;
  ctx.local_rank = place.local_rank;
  ctx.device = opts.device;
  ctx.store = store;
  ctx.session = session;
  ctx.listen_host = origin.listen_host;
  ctx.token = job_token(opts, settings);
  ctx.timeout = opts.timeout;
  ctx.settings = settings;
  auto backend = entry.make(ctx);
  // A setting the backend does not honour is said once, by rank 0, rather
  // than ignored in silence.
  if (place.rank == 0) {
    for (const auto& row : setting_rows()) {
      if (!source.chosen(row.name)) continue;
      if (auto notice = ignored_setting(entry, row, *source.raw(row.name))) log::warn("{}", *notice);
    }
  }
  auto impl = std::make_unique<ProcessGroup::Impl>(GroupIdentity{place.rank, place.world, place.local_rank,
                                                                 place.local_world, opts.backend, opts.timeout},
                                                   settings, origin, GroupSession{session, certified}, store,
                                                   std::move(backend), std::move(clock));
  // Named in dumps by its store prefix: the same on every rank, and
  // another for each group (generations, shrink, grow).
  impl->register_for_dumps(fr_dump_place(settings, source), session);
  log::info("rank {} of {} joined group '{}' (backend {}, generation {})", place.rank, place.world, opts.group_name,
            opts.backend, generation);
  // Where the group of this job is now (init, then each shrink and grow):
  // what a replacement process reads to find it (join_running_group).
  if (place.rank == 0) origin.base->set(keys::current_session(origin.lineage), to_bytes(session));
  finish_together(*store, place, opts.timeout);
  return std::make_shared<ProcessGroup>(std::move(impl));
}

}  // namespace mci
