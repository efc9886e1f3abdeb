// One thread per client connection, blocked either on its socket or in its
// request to etcd (a wait may last minutes); one thread that accepts and
// watches every connection for its end, so that a connection's promises are
// kept the moment it closes even while its request still waits; one that
// keeps the lease alive; one that keeps lost relays' promises; one per
// watched relay (the next two, in the order of their names), holding an
// idle connection to it.
#include "store/store_relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "store/server_auth.hpp"
#include "store/wire.hpp"

namespace mci {

namespace {

using std::chrono::milliseconds;

constexpr auto kAuthLimit = std::chrono::seconds(10);
constexpr auto kFrameLimit = std::chrono::seconds(60);  // the rest of a frame once its first byte came
const std::string kAlive = "mci/relay/alive/";
const std::string kJobLease = "mci/relay/job_lease";
// The job's lease lives this long past the last relay: a dead job's keys go.
constexpr auto kJobLeaseTtl = std::chrono::seconds(10);
const std::string kPromise = "mci/relay/promise/";

StoreValue encode_promise(const std::string& key, const StoreValue& value) {
  const auto n = static_cast<std::uint32_t>(key.size());
  std::array<std::uint8_t, 4> len{};
  std::memcpy(len.data(), &n, 4);
  StoreValue out(len.begin(), len.end());
  out.reserve(4 + key.size() + value.size());
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

bool decode_promise(const StoreValue& in, std::string& key, StoreValue& value) {
  if (in.size() < 4) return false;
  std::uint32_t n = 0;
  std::memcpy(&n, in.data(), 4);
  if (in.size() - 4 < n) return false;
  key.assign(in.begin() + 4, in.begin() + 4 + n);
  value.assign(in.begin() + 4 + n, in.end());
  return true;
}

std::string random_part() {
  const auto n = auth::random_nonce();
  return fmt::format("{:02x}{:02x}{:02x}{:02x}", n[0], n[1], n[2], n[3]);
}

struct Promise {
  std::string key;
  StoreValue value;
  std::string mirror;  // its copy on etcd, for when this relay is lost
};

struct Conn {
  std::uint64_t id = 0;  // names its promises' copies: a lost relay's are settled a connection at a time
  Fd fd;
  auth::Nonce nonce{};
  std::thread thread;
  std::atomic<bool> done{false};
  std::mutex mu;  // guards what follows
  std::vector<Promise> promises;
  bool kept = false;                 // its promises are written: it is over
  std::shared_ptr<EtcdStore> store;  // its requests' own connection to etcd
};

}  // namespace

struct StoreRelay::Impl {
  StoreRelayOptions o;
  std::string rid;
  Fd listener;
  int port = 0;
  Fd wake_read, wake_write;
  std::atomic<bool> stopping{false};
  std::atomic<bool> lost{false};
  std::atomic<bool> reachable{true};  // the last renewal got through
  mutable std::mutex trouble_mu;
  std::string trouble;  // guarded by trouble_mu: the last failure to reach etcd
  void note_trouble(const std::string& why) {
    std::lock_guard lk(trouble_mu);
    trouble = why;
  }
  std::atomic<std::uint64_t> kept_for_others{0};
  std::atomic<std::uint64_t> next_promise{0};
  std::uint64_t next_conn = 0;  // the door's
  // Promises, lost relays' sweeps; the lease's renewals on a connection of
  // their own, never queued behind a slow request.
  std::shared_ptr<EtcdStore> control;
  std::shared_ptr<EtcdStore> keeper;
  std::int64_t lease = 0;  // this relay's: its alive key
  std::chrono::seconds granted{0};
  std::int64_t job_lease = 0;  // the job's: every key of the job
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  std::mutex conns_mu;
  std::vector<std::shared_ptr<Conn>> conns;
  std::thread door, keep_thread, sweep_thread;
  // A read-modify-write (add, compare_set, append) is a read and a
  // compare-and-swap on etcd: this node's ranks adding to one counter at
  // once (an agreement's count at init) would fail each other's swaps and
  // retry, n^2/2 tries for n ranks. Queued here per key, they cost one try
  // each; only other nodes' relays still race them.
  std::array<std::mutex, 64> rmw_mu;
  std::mutex& rmw_lock(const std::string& key) { return rmw_mu[std::hash<std::string>{}(key) % rmw_mu.size()]; }
  std::mutex peers_mu;
  std::set<std::string> dead;                   // relays their watchers found gone
  std::map<std::string, std::thread> watchers;  // by relay, started by the sweeper

  void run_door();
  void accept_one();
  void serve(const std::shared_ptr<Conn>& c);
  bool handle(Conn& c, store::Request& r, store::Response& resp);
  // Writes a connection's promises, once, and ends a request it still waits on.
  void keep_promises(Conn& c);
  // Marks a connection ended and ends a request it still waits on; its own
  // thread then keeps its promises (keep_promises).
  void end_conn(Conn& c);
  void run_keeper();
  void run_sweeper();
  void sweep();
  void become_lost();
  void watch_next(const std::vector<std::pair<std::string, StoreValue>>& alive);
  void watch(const std::string& peer, const std::string& addr);
  std::int64_t acquire_job_lease();
  // Writes promises and removes their copies, once (false: already done).
  bool settle(const std::vector<Promise>& promises);
  void wake() {
    char b = 1;
    ssize_t ignored = ::write(wake_write.get(), &b, 1);
    (void)ignored;
  }
  // Sleeps up to `d`; false when the relay is stopping.
  bool pause(milliseconds d) {
    std::unique_lock lk(stop_mu);
    return !stop_cv.wait_for(lk, d, [&] { return stopping.load(); });
  }
};

StoreRelay::StoreRelay(StoreRelayOptions o) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = std::move(o);
  m.rid = fmt::format("{}-{}-{}", host_name(), ::getpid(), random_part());
  // A renewal that waits on an unreachable member must not outlast the
  // lease it renews.
  EtcdStoreOptions renewals = m.o.etcd;
  renewals.request_timeout = std::max<milliseconds>(m.o.lease_ttl / 3, milliseconds(300));
  m.keeper = std::make_shared<EtcdStore>(renewals);
  m.job_lease = m.acquire_job_lease();
  m.o.etcd.lease = m.job_lease;  // every write of the job's, from here on
  // Every wait of its clients learns of changes from one watch.
  m.o.etcd.changes = std::make_shared<EtcdChanges>(m.o.etcd);
  m.control = std::make_shared<EtcdStore>(m.o.etcd);
  m.listener = listen_tcp(m.o.host, m.o.port, 1024);
  set_nonblocking(m.listener.get());
  m.port = local_port(m.listener.get());
  m.lease = m.keeper->grant_lease(m.o.lease_ttl, &m.granted);
  // Its address: where the others watch it.
  const std::string at = HostPort{m.o.host, m.port}.text();
  m.control->set(kAlive + m.rid, to_bytes(at), m.lease);
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("mci store relay: pipe2 failed");
  m.wake_read.reset(p[0]);
  m.wake_write.reset(p[1]);
  m.door = std::thread([&m] { m.run_door(); });
  m.keep_thread = std::thread([&m] { m.run_keeper(); });
  m.sweep_thread = std::thread([&m] { m.run_sweeper(); });
  log::info("store relay {}: serving {}:{} from etcd (job '{}', lease TTL {} s)", m.rid, m.o.host, m.port,
            m.o.etcd.job_id, m.granted.count());
}

StoreRelay::~StoreRelay() {
  Impl& m = *impl_;
  {
    std::lock_guard lk(m.stop_mu);
    m.stopping = true;
  }
  m.stop_cv.notify_all();
  m.wake();
  if (m.door.joinable()) m.door.join();
  // Every connection still open ends now, and keeps its promises (its
  // process outlived this relay, which a death certificate must not wait for).
  std::vector<std::shared_ptr<Conn>> conns;
  {
    std::lock_guard lk(m.conns_mu);
    conns.swap(m.conns);
  }
  for (auto& c : conns) {
    ::shutdown(c->fd.get(), SHUT_RDWR);
    m.end_conn(*c);
  }
  for (auto& c : conns) {
    if (c->thread.joinable()) c->thread.join();  // it keeps its promises on its way out
    m.keep_promises(*c);                         // nothing left, unless it never ran
  }
  if (m.keep_thread.joinable()) m.keep_thread.join();
  if (m.sweep_thread.joinable()) m.sweep_thread.join();
  for (auto& [peer, t] : m.watchers) t.join();
  // Its promises are kept: the lease can go, and its alive key with it.
  try {
    if (!m.lost) m.keeper->revoke_lease(m.lease);
  } catch (const std::exception& e) {
    log::warn("store relay {}: could not revoke its lease ({}); it ends within {} s", m.rid, e.what(),
              m.granted.count());
  }
}

// The job's lease: the first relay grants it and publishes it under itself;
// the others renew that one. Its key goes with it, so a published lease is
// a live one (unless it ends just now: then look again).
std::int64_t StoreRelay::Impl::acquire_job_lease() {
  for (int tries = 0; tries < 10; ++tries) {
    const std::int64_t mine = keeper->grant_lease(std::max(kJobLeaseTtl, o.lease_ttl));
    EtcdStoreOptions under = o.etcd;
    under.lease = mine;
    const std::string won = to_string(EtcdStore(under).compare_set(kJobLease, {}, to_bytes(std::to_string(mine))));
    if (won == std::to_string(mine)) return mine;
    keeper->revoke_lease(mine);
    const std::int64_t theirs = std::stoll(won);
    if (keeper->keep_alive(theirs)) return theirs;
  }
  throw Error(fmt::format("the job's lease on etcd kept ending while this relay started (job '{}')", o.etcd.job_id));
}

void StoreRelay::end_job() {
  try {
    impl_->keeper->revoke_lease(impl_->job_lease);
  } catch (const std::exception& e) {
    log::warn("store relay {}: could not end the job's keys on etcd ({}): they expire within {} s", impl_->rid,
              e.what(), kJobLeaseTtl.count());
  }
}

int StoreRelay::port() const { return impl_->port; }
const std::string& StoreRelay::host() const { return impl_->o.host; }
const std::string& StoreRelay::id() const { return impl_->rid; }
std::chrono::seconds StoreRelay::lease_ttl() const { return impl_->granted; }
std::int64_t StoreRelay::lease() const { return impl_->lease; }
bool StoreRelay::lost() const { return impl_->lost; }
std::string StoreRelay::trouble() const {
  std::lock_guard lk(impl_->trouble_mu);
  return impl_->trouble;
}
std::uint64_t StoreRelay::kept_for_others() const { return impl_->kept_for_others; }

// The door: accepts, and hears each connection end (POLLRDHUP) while its
// thread may be blocked in a request to etcd.
void StoreRelay::Impl::run_door() {
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<Conn>> watched;
  while (!stopping) {
    fds.clear();
    watched.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    // Lost, it serves nobody: a newcomer is refused at once, not left waiting.
    if (lost && listener.valid()) listener.reset();
    fds.push_back({listener.get(), POLLIN, 0});  // -1 once closed, which poll skips
    {
      std::lock_guard lk(conns_mu);
      // Threads that ended are joined here; their sockets close with them.
      std::erase_if(conns, [](const std::shared_ptr<Conn>& c) {
        if (!c->done) return false;
        if (c->thread.joinable()) c->thread.join();
        return true;
      });
      for (const auto& c : conns) {
        std::lock_guard ck(c->mu);
        if (c->kept) continue;
        fds.push_back({c->fd.get(), POLLRDHUP, 0});
        watched.push_back(c);
      }
    }
    // The timeout only bounds how long an ended thread waits to be joined.
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) {
      log::error("store relay {}: poll failed: {}", rid, std::strerror(errno));
      return;
    }
    if (fds[0].revents) {
      char sink[64];
      while (::read(wake_read.get(), sink, sizeof sink) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) accept_one();
    for (std::size_t i = 2; i < fds.size(); ++i) {
      // Its thread writes the promises: the door must not wait on etcd.
      if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) end_conn(*watched[i - 2]);
    }
  }
}

void StoreRelay::Impl::accept_one() {
  const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  set_nodelay(fd);
  auto c = std::make_shared<Conn>();
  c->id = next_conn++;
  c->fd.reset(fd);
  c->nonce = auth::random_nonce();
  std::lock_guard lk(conns_mu);
  conns.push_back(c);
  c->thread = std::thread([this, c] { serve(c); });
}

void StoreRelay::Impl::serve(const std::shared_ptr<Conn>& cp) {
  Conn& c = *cp;
  const int fd = c.fd.get();
  StoreValue frame;
  auto send = [&](const store::Response& r) {
    frame.clear();
    store::encode(r, frame);
    return send_all(fd, frame.data(), frame.size(), Deadline(kFrameLimit)) == Io::ok;
  };
  bool authed = false;
  std::string why;
  if (send(store::greeting(c.nonce, !o.token.empty()))) {
    for (;;) {
      std::array<std::uint8_t, store::kHeaderSize> head{};
      if (authed) {
        pollfd p{fd, POLLIN, 0};
        while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
        }
      }
      if (recv_all(fd, head.data(), head.size(), Deadline(authed ? kFrameLimit : kAuthLimit)) != Io::ok) break;
      const auto len = store::body_length(head);
      StoreValue body(len.value_or(0));
      if (!len || recv_all(fd, body.data(), body.size(), Deadline(kFrameLimit)) != Io::ok) {
        why = "malformed or cut frame";
        break;
      }
      auto req = store::decode_request(body);
      if (!req) {
        why = "malformed request body";
        break;
      }
      store::Response resp;
      if (!authed) {
        store::AuthCheck check =
            req->op == store::Op::auth ? store::check_auth(o.token, c.nonce, *req) : store::AuthCheck{};
        if (!check.ok) {
          why = check.why ? check.why : "request before authentication";
          if (check.refusal) {
            const std::string text =
                fmt::format("a process that connected {}, from {}", check.refusal, peer_address(fd));
            try {
              control->set(std::string(store::kRefusedKey), to_bytes(text));
            } catch (const std::exception&) {
            }
          }
          break;
        }
        authed = true;
        resp = std::move(check.answer);
      } else {
        try {
          if (!handle(c, *req, resp)) {
            why = "unexpected opcode";
            break;
          }
        } catch (const Error& e) {
          // etcd out of reach, or this relay closing: the client hears its
          // store go away, as it would from mci's own store server.
          bool ended = false;  // its client went first: nobody to tell
          {
            std::lock_guard lk(c.mu);
            ended = c.kept;
          }
          if (!stopping && !ended) {
            log::warn("store relay {}: a request failed, closing its connection: {}", rid, e.what());
            note_trouble(e.what());
          }
          break;
        }
      }
      if (!send(resp)) break;
    }
  }
  if (!why.empty() && !stopping)
    log::warn("store relay {}: dropped a connection from {}: {}", rid, peer_address(fd), why);
  ::shutdown(fd, SHUT_RDWR);
  keep_promises(c);
  c.done = true;
  wake();
}

// One request, on the connection's own etcd client (a wait blocks that
// connection only). False for an opcode a client never sends.
bool StoreRelay::Impl::handle(Conn& c, store::Request& r, store::Response& resp) {
  using store::Op;
  std::shared_ptr<EtcdStore> s;
  {
    std::lock_guard lk(c.mu);
    if (c.kept) throw Error("the connection ended");
    if (!c.store) {
      // Starting where the relay's own requests were last answered: not at
      // a member that may be out of reach.
      EtcdStoreOptions e = o.etcd;
      const std::string first = control->endpoint_in_use();
      const auto it = std::find(e.endpoints.begin(), e.endpoints.end(), first);
      if (it != e.endpoints.end()) std::rotate(e.endpoints.begin(), it, e.endpoints.end());
      c.store = std::make_shared<EtcdStore>(e);
    }
    s = c.store;
  }
  const milliseconds wait(std::max<std::int64_t>(r.num, 0));
  switch (r.op) {
    case Op::set: s->set(r.keys[0], r.value); return true;
    case Op::get: try { resp.value = s->get(r.keys[0], wait);
      } catch (const TimeoutError&) {
        resp.status = store::Status::timeout;
      }
      return true;
    case Op::wait: try { s->wait(r.keys, wait);
      } catch (const TimeoutError&) {
        resp.status = store::Status::timeout;
      }
      return true;
    case Op::get_range: {
      std::vector<std::optional<StoreValue>> values;
      const auto asked = Clock::now();
      try {
        values = s->get_range(r.keys[0], r.first, r.count, r.keys[1], wait);
      } catch (const TimeoutError&) {
        // A range that timed out still says which keys were there, so that
        // the client can name the missing ones.
        resp.status = store::Status::timeout;
        std::vector<std::string> keys;
        for (std::int64_t i = 0; i < r.count; ++i) keys.push_back(fmt::format("{}/{}", r.keys[0], r.first + i));
        // Within what is left of the client's patience (it gives up on its
        // answer a second past the wait's deadline, and a late answer would
        // break its connection; a slow etcd may have used most of it):
        // otherwise the keys are told missing.
        const auto left = std::chrono::duration_cast<milliseconds>(asked + wait + milliseconds(800) - Clock::now());
        if (left >= milliseconds(1)) {
          try {
            values = s->read(keys, std::min(left, milliseconds(500)));
          } catch (const PeerError&) {
            values.clear();  // etcd did not answer in time either
          }
        }
        if (values.size() != keys.size()) values.assign(keys.size(), std::nullopt);
      }
      std::vector<const StoreValue*> ptrs;
      for (const auto& v : values) ptrs.push_back(v ? &*v : nullptr);
      store::encode_range(ptrs, resp.value);
      return true;
    }
    case Op::add: {
      const std::lock_guard lk(rmw_lock(r.keys[0]));
      resp.num = s->add(r.keys[0], r.num);
      return true;
    }
    case Op::compare_set: {
      const std::lock_guard lk(rmw_lock(r.keys[0]));
      resp.value = s->compare_set(r.keys[0], r.value, r.value2);
      return true;
    }
    case Op::append: {
      const std::lock_guard lk(rmw_lock(r.keys[0]));
      resp.value = s->append(r.keys[0], r.value);
      return true;
    }
    case Op::append_on_close: {
      Promise p{r.keys[0], r.value, fmt::format("{}{}/{}-{}", kPromise, rid, c.id, next_promise++)};
      s->set(p.mirror, encode_promise(p.key, p.value));
      // Held even when the connection ended meanwhile: its copy is on etcd
      // now, and this thread keeps its connection's promises on its way out.
      std::lock_guard lk(c.mu);
      c.promises.push_back(std::move(p));
      return true;
    }
    case Op::check: resp.num = s->check(r.keys) ? 1 : 0; return true;
    case Op::remove: resp.num = s->remove(r.keys[0]) ? 1 : 0; return true;
    case Op::num_keys: resp.num = s->num_keys(); return true;
    default: return false;
  }
}

void StoreRelay::Impl::end_conn(Conn& c) {
  std::shared_ptr<EtcdStore> s;
  {
    std::lock_guard lk(c.mu);
    if (c.kept) return;
    c.kept = true;
    s = c.store;
  }
  if (s) s->interrupt();  // a wait still running is for nobody now: its thread keeps the promises
}

void StoreRelay::Impl::keep_promises(Conn& c) {
  end_conn(c);
  std::vector<Promise> promises;
  {
    std::lock_guard lk(c.mu);
    promises.swap(c.promises);
  }
  // A lost relay's promises are the other relays' to keep (they may have
  // already): writing them again would repeat a certificate. While etcd is
  // out of reach (the last renewal failed), it leaves them to the others
  // too: its lease ends soon, and a write would hold this thread a request
  // timeout for nothing.
  if (lost || !reachable) return;
  // One transaction: the claims (a sweeper that thinks this relay lost may
  // race it) and one append per key, so a reader sees a connection's
  // certificates at once, as mci's own store writes them.
  if (promises.empty()) return;
  try {
    settle(promises);
  } catch (const std::exception& e) {
    log::error("store relay {}: could not write the promises of a connection that ended ('{}'...): {}", rid,
               promises.front().key, e.what());
  }
}

bool StoreRelay::Impl::settle(const std::vector<Promise>& promises) {
  std::vector<std::string> claims;
  std::vector<std::pair<std::string, StoreValue>> writes;
  for (const auto& p : promises) {
    claims.push_back(p.mirror);
    auto it = std::find_if(writes.begin(), writes.end(), [&](const auto& w) { return w.first == p.key; });
    if (it == writes.end()) it = writes.insert(writes.end(), {p.key, {}});
    it->second.insert(it->second.end(), p.value.begin(), p.value.end());
  }
  return control->settle(claims, writes);
}

void StoreRelay::Impl::run_keeper() {
  const milliseconds every = std::max<milliseconds>(granted / 3, milliseconds(100));
  auto last_renewed = Clock::now();
  while (pause(every)) {
    try {
      if (!keeper->keep_alive(lease)) {
        note_trouble(
            "its lease on etcd had ended (this node was cut off for longer than it), so the other nodes "
            "counted this node's processes gone");
        become_lost();
        return;
      }
      reachable = true;
      // The job's lease too: while any relay runs, the job's keys stay. Its
      // end while this relay's own lease lives is node 0 ending the job.
      if (!keeper->keep_alive(job_lease)) {
        log::debug("store relay {}: the job's keys were ended (node 0 finished the job)", rid);
        return;
      }
      last_renewed = Clock::now();
    } catch (const std::exception& e) {
      reachable = false;
      // Unrenewed for three TTLs, the lease has ended on etcd's side: etcd
      // extends leases across a leader's election (an election timeout), so
      // a single TTL without an answer, while the members elect a new
      // leader, is not yet the end; this node cut off from the quorum for
      // that long is (the others have counted its processes gone).
      if (Clock::now() - last_renewed >= 3 * granted) {
        log::warn("store relay {}: could not renew its lease for {} s: {}", rid, granted.count(), e.what());
        note_trouble(
            fmt::format("its lease could not be renewed for {} s, so the other nodes counted this node's "
                        "processes gone: {}",
                        3 * granted.count(), e.what()));
        become_lost();
        return;
      }
    }
  }
}

void StoreRelay::Impl::become_lost() {
  lost = true;
  log::error(
      "store relay {}: this node was cut off from etcd for longer than its lease ({} s): the other nodes counted its "
      "processes gone; closing their store connections so that they stop",
      rid, granted.count());
  std::lock_guard lk(conns_mu);
  for (auto& c : conns) ::shutdown(c->fd.get(), SHUT_RDWR);
  wake();
}

void StoreRelay::Impl::run_sweeper() {
  while (pause(o.sweep_every)) {
    if (lost) return;
    try {
      sweep();
    } catch (const std::exception& e) {
      log::debug("store relay {}: sweep failed: {}", rid, e.what());
    }
  }
}

// Keeps the promises of relays whose lease has ended. The alive keys and the
// promises are read in one transaction: a relay that starts meanwhile
// writes its alive key before any promise, so it is never taken for lost.
void StoreRelay::Impl::sweep() {
  const auto lists = control->list({kAlive, kPromise});
  watch_next(lists[0]);
  std::set<std::string> alive;
  {
    std::lock_guard lk(peers_mu);
    for (const auto& [k, v] : lists[0]) {
      if (!dead.count(k.substr(kAlive.size()))) alive.insert(k.substr(kAlive.size()));
    }
  }
  // A lost relay's promises, a connection at a time (mirror keys are
  // RELAY/CONN-N): each connection's certificates in one transaction.
  std::map<std::string, std::vector<Promise>> orphans;
  for (const auto& [k, v] : lists[1]) {
    const std::string rest = k.substr(kPromise.size());
    const std::string owner = rest.substr(0, rest.find('/'));
    if (owner == rid || alive.count(owner)) continue;
    Promise p;
    if (!decode_promise(v, p.key, p.value)) continue;
    p.mirror = k;
    orphans[rest.substr(0, rest.find('-', owner.size()))].push_back(std::move(p));
  }
  for (const auto& [conn, promises] : orphans) {
    if (!settle(promises)) continue;  // another relay did
    kept_for_others += promises.size();
    log::info("store relay {}: relay {} is lost: wrote its connection's {} promise(s) ('{}'...)", rid,
              conn.substr(0, conn.find('/')), promises.size(), promises.front().key);
  }
}

// A lease ends a second or more after its relay; a relay's port that
// refuses connections says at once that its process is gone (its host's
// kernel answers for it). Each relay watches the next two in the order of
// their names, so that every relay is watched twice and a relay holds two
// idle connections, however many nodes the job has.
void StoreRelay::Impl::watch_next(const std::vector<std::pair<std::string, StoreValue>>& alive) {
  std::vector<std::pair<std::string, std::string>> ring;  // id, address; sorted by id (etcd's range order)
  for (const auto& [k, v] : alive) ring.emplace_back(k.substr(kAlive.size()), to_string(v));
  const auto me = std::find_if(ring.begin(), ring.end(), [&](const auto& r) { return r.first == rid; });
  if (me == ring.end()) return;
  const auto at = static_cast<std::size_t>(me - ring.begin());
  for (std::size_t k = 1; k <= 2 && k < ring.size(); ++k) {
    const auto& [peer, addr] = ring[(at + k) % ring.size()];
    if (watchers.count(peer)) continue;
    watchers.emplace(peer, std::thread([this, peer = peer, addr = addr] { watch(peer, addr); }));
  }
}

void StoreRelay::Impl::watch(const std::string& peer, const std::string& addr) {
  std::string why;
  const auto at = split_host_port(addr, why);
  if (!at || at->port == 0) {
    // Not a relay's address (another program wrote the key): its lease tells.
    log::warn("store relay {}: relay {} published '{}', not an address ({}): not watched", rid, peer, addr, why);
    return;
  }
  const std::string& host = at->host;
  const int port = at->port;
  while (!stopping && !lost) {
    try {
      TcpStoreOptions t;
      t.host = host;
      t.port = port;
      t.token = o.token;
      t.timeout = std::chrono::seconds(2);
      t.connect_timeout = std::chrono::seconds(1);
      TcpStore link(t);
      while (!stopping && !link.wait_for_close(milliseconds(200))) {
      }
    } catch (const std::exception&) {
      // Not reached, or not served: asked below whether anyone listens.
    }
    if (stopping || lost) return;
    // Its connection closed: is anyone still listening there?
    std::string error;
    Fd probe = connect_start(host, port, error);
    int err = probe.valid() ? 0 : error == std::strerror(ECONNREFUSED) ? ECONNREFUSED : EHOSTUNREACH;
    if (probe.valid()) {
      pollfd p{probe.get(), POLLOUT, 0};
      if (::poll(&p, 1, 500) != 1) return;  // no answer at all: its lease will tell
      socklen_t len = sizeof err;
      ::getsockopt(probe.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) continue;           // it listens: only this link broke
    if (err != ECONNREFUSED) return;  // unreachable: its lease will tell
    {
      std::lock_guard lk(peers_mu);
      dead.insert(peer);
    }
    log::info("store relay {}: relay {} at {} refuses connections: its node's mcirun is gone", rid, peer, addr);
    return;
  }
}

}  // namespace mci
