// The store server: one thread, one epoll loop, every client non-blocking.
// Requests that must wait (get, wait, get_range) are parked on the one key
// they miss and woken when a write creates it, or answered "timeout" when
// their deadline passes; a write costs the waiters of its key, not every
// waiter. A client that sends a malformed frame, fails authentication or
// stops reading is dropped, and nothing else.
//
// Holding the crowd: each turn of the loop reads at most one buffer per
// ready client and accepts at most kAcceptBatch connections, so a flood of
// connections cannot starve the clients already in. A connection that has
// not authenticated may send one small frame and must do so within
// kAuthLimit; at most kMaxUnauthed of them are held at once. Beyond that
// the oldest goes if it had kEvictAfter to answer (a client answers the
// greeting within a round trip); otherwise the server stops accepting until
// one authenticates or goes, and newcomers wait in the kernel's backlog:
// thousands of ranks starting together are served in turn, not refused.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <queue>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/server_auth.hpp"
#include "store/wire.hpp"

namespace mci {

namespace {

constexpr std::size_t kMaxPendingOut = 256u << 20;  // a client that stops reading is dropped
constexpr std::size_t kReadChunk = 64u << 10;
constexpr std::size_t kMaxAuthFrame = 512;  // the auth frame is ~150 bytes
constexpr auto kAuthLimit = std::chrono::seconds(10);
constexpr std::size_t kMaxUnauthed = 1024;
constexpr auto kEvictAfter = std::chrono::seconds(1);
constexpr int kAcceptBatch = 64;
constexpr std::uint64_t kWakeId = 0, kListenId = 1, kFirstClient = 2;

struct Client {
  std::uint64_t id = 0;
  Fd fd;
  StoreValue in;
  StoreValue out;
  std::size_t out_off = 0;
  bool authed = false;
  bool want_out = false;     // registered for EPOLLOUT
  bool doomed = false;       // dropped by the loop: too much unread output
  std::uint64_t waiter = 0;  // its parked request, 0 if none
  auth::Nonce nonce{};
  // Appended when the connection ends, however it ends (append_on_close):
  // how a group's survivors learn that a process is gone without waiting.
  std::vector<std::pair<std::string, StoreValue>> on_close;
};

struct Waiter {
  std::uint64_t client = 0;
  store::Op op{};
  std::vector<std::string> keys;  // get: the key; wait: the keys; get_range: prefix, stop
  std::int64_t first = 0, count = 0;
  std::int64_t next = 0;  // wait/get_range: the first index not yet seen present
  Clock::time_point deadline;
};

using Deadlines = std::priority_queue<std::pair<Clock::time_point, std::uint64_t>,
                                      std::vector<std::pair<Clock::time_point, std::uint64_t>>, std::greater<>>;

}  // namespace

struct StoreServer::Impl {
  std::string host;
  std::string token;
  Fd listener;
  int port = 0;
  Fd wake_read, wake_write;
  Fd epoll;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> rejected{0};
  std::thread thread;

  // Owned by the server thread only.
  std::unordered_map<std::uint64_t, Client> clients;
  std::unordered_map<std::string, StoreValue> data;
  std::unordered_map<std::uint64_t, Waiter> waiters;
  std::unordered_map<std::string, std::vector<std::uint64_t>> watchers;  // key -> waiters missing it
  Deadlines deadlines;
  std::deque<std::pair<Clock::time_point, std::uint64_t>> unauthed;  // in accept order
  std::size_t unauthed_live = 0;
  bool accepting = true;  // the listener is in the epoll set
  std::vector<std::uint64_t> doomed;
  std::vector<std::uint8_t> read_buf = std::vector<std::uint8_t>(kReadChunk);
  std::uint64_t next_id = kFirstClient;
  std::uint64_t next_waiter = 1;
  std::uint64_t refusals = 0;

  void run();
  void accept_some();
  void set_accepting(bool on);
  // Drops the oldest unauthenticated connection if it had kEvictAfter; false
  // if none did.
  bool evict_oldest();
  void unauthed_gone();
  void on_readable(std::uint64_t id, Client& c);
  void process(std::uint64_t id, Client& c);
  void handle(std::uint64_t id, Client& c, store::Request& r);
  void reply(Client& c, const store::Response& r);
  void flush(Client& c);
  void watch_out(Client& c, bool on);
  void drop(std::uint64_t id, const char* why);
  void note_refusal(std::uint64_t id, const char* how);
  void park(Client& c, Waiter w);
  // The key a waiter still misses (nullptr: it can be answered).
  const std::string* missing(Waiter& w, std::string& scratch) const;
  store::Response result(const Waiter& w);
  void answer(std::uint64_t wid, bool timed_out);
  void wrote(const std::string& key);
  void expire();
  int next_timeout_ms();
};

StoreServer::StoreServer(const StoreServerOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->host = opts.host;
  impl_->token = opts.token;
  impl_->listener = listen_tcp(opts.host, opts.port, 4096);
  set_nonblocking(impl_->listener.get());
  impl_->port = local_port(impl_->listener.get());
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("mci store: pipe2 failed");
  impl_->wake_read.reset(p[0]);
  impl_->wake_write.reset(p[1]);
  impl_->epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl_->epoll.valid()) throw Error(fmt::format("mci store: epoll_create1 failed: {}", std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  ::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_ADD, impl_->wake_read.get(), &ev);
  ev.data.u64 = kListenId;
  ::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_ADD, impl_->listener.get(), &ev);
  impl_->thread = std::thread([this] { impl_->run(); });
}

StoreServer::~StoreServer() {
  impl_->stopping = true;
  char b = 1;
  ssize_t ignored = ::write(impl_->wake_write.get(), &b, 1);
  (void)ignored;
  if (impl_->thread.joinable()) impl_->thread.join();
}

int StoreServer::port() const { return impl_->port; }
const std::string& StoreServer::host() const { return impl_->host; }
std::uint64_t StoreServer::rejected_connections() const { return impl_->rejected.load(); }

void StoreServer::Impl::run() {
  std::vector<epoll_event> events(256);
  while (!stopping) {
    const int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
    if (n < 0 && errno != EINTR) {
      log::error("store server: epoll_wait failed: {}", std::strerror(errno));
      return;
    }
    if (stopping) return;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      const std::uint32_t re = events[i].events;
      if (id == kWakeId) continue;
      if (id == kListenId) {
        accept_some();
        continue;
      }
      auto it = clients.find(id);
      if (it == clients.end()) continue;
      if (re & EPOLLERR) {
        drop(id, nullptr);
        continue;
      }
      if (re & EPOLLOUT) flush(it->second);
      if (re & (EPOLLIN | EPOLLHUP)) on_readable(id, it->second);
    }
    expire();
    for (auto id : doomed) drop(id, "it stopped reading its answers");
    doomed.clear();
  }
}

void StoreServer::Impl::set_accepting(bool on) {
  if (accepting == on) return;
  accepting = on;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(epoll.get(), on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listener.get(), &ev);
}

bool StoreServer::Impl::evict_oldest() {
  while (!unauthed.empty()) {
    const auto [since, id] = unauthed.front();
    auto it = clients.find(id);
    if (it == clients.end() || it->second.authed) {
      unauthed.pop_front();
      continue;
    }
    if (Clock::now() - since < kEvictAfter) return false;
    unauthed.pop_front();
    drop(id, "too many connections waiting to authenticate");
    return true;
  }
  return false;
}

void StoreServer::Impl::unauthed_gone() {
  --unauthed_live;
  if (!accepting && unauthed_live < kMaxUnauthed) set_accepting(true);
}

void StoreServer::Impl::accept_some() {
  for (int k = 0; k < kAcceptBatch; ++k) {
    if (unauthed_live >= kMaxUnauthed && !evict_oldest()) {
      set_accepting(false);  // back when one authenticates, goes, or can be evicted
      return;
    }
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    set_nodelay(fd);
    Client c;
    c.fd.reset(fd);
    c.nonce = auth::random_nonce();
    const std::uint64_t id = next_id++;
    c.id = id;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;  // c closes the socket
    auto [it, ok] = clients.emplace(id, std::move(c));
    unauthed.emplace_back(Clock::now(), id);
    ++unauthed_live;
    reply(it->second, store::greeting(it->second.nonce, !token.empty()));
  }
}

void StoreServer::Impl::on_readable(std::uint64_t id, Client& c) {
  // One buffer per turn: a client that never stops sending cannot hold the
  // loop. Read through the loop's own buffer, so that a client holds only
  // what it sent (a 64 KiB vector per client would be 256 MiB at 4,096).
  ssize_t r;
  do {
    r = ::recv(c.fd.get(), read_buf.data(), read_buf.size(), MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r > 0) c.in.insert(c.in.end(), read_buf.data(), read_buf.data() + r);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
    // What it sent before leaving still counts (a refused process's
    // proof-less auth, which its peers should hear about); then it goes,
    // and its parked request with it.
    if (!c.in.empty()) process(id, c);
    drop(id, nullptr);
    return;
  }
  if (!c.authed && c.in.size() > kMaxAuthFrame) {
    if (!token.empty()) note_refusal(id, "without a job token");
    drop(id, "sent more than a greeting before authenticating");
    return;
  }
  if (c.waiter && c.in.size() > store::kMaxBody + store::kHeaderSize) {
    drop(id, "sent more than a request while its request waited");
    return;
  }
  process(id, c);
}

void StoreServer::Impl::process(std::uint64_t id, Client& c) {
  std::size_t off = 0;
  while (!c.waiter && !c.doomed && c.in.size() - off >= store::kHeaderSize) {
    auto len =
        store::body_length(std::span<const std::uint8_t, store::kHeaderSize>(c.in.data() + off, store::kHeaderSize));
    if (!len) {
      drop(id, "malformed frame header (bad magic or oversized body)");
      return;
    }
    if (c.in.size() - off < store::kHeaderSize + *len) break;
    auto req = store::decode_request(std::span<const std::uint8_t>(c.in.data() + off + store::kHeaderSize, *len));
    off += store::kHeaderSize + *len;
    if (!req) {
      drop(id, "malformed request body");
      return;
    }
    if (!c.authed && req->op != store::Op::auth) {
      if (!token.empty()) note_refusal(id, "without a job token");
      drop(id, "request before authentication");
      return;
    }
    handle(id, c, *req);
    if (clients.find(id) == clients.end()) return;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
  if (c.in.empty() && c.in.capacity() > kReadChunk) StoreValue().swap(c.in);  // a big set's buffer goes
}

void StoreServer::Impl::handle(std::uint64_t id, Client& c, store::Request& r) {
  using store::Op;
  store::Response resp;
  switch (r.op) {
    case Op::auth: {
      if (c.authed) {
        drop(id, "second authentication");
        return;
      }
      store::AuthCheck check = store::check_auth(token, c.nonce, r);
      if (!check.ok) {
        note_refusal(id, check.refusal);
        drop(id, check.why);
        return;
      }
      resp = std::move(check.answer);
      c.authed = true;
      unauthed_gone();
      break;
    }
    case Op::set:
      data[r.keys[0]] = std::move(r.value);
      reply(c, resp);
      wrote(r.keys[0]);
      return;
    case Op::get:
    case Op::wait:
    case Op::get_range: {
      Waiter w;
      w.client = id;
      w.op = r.op;
      w.keys = std::move(r.keys);
      w.first = r.first;
      w.count = r.count;
      w.deadline = Clock::now() + std::chrono::milliseconds(r.num);
      park(c, std::move(w));
      return;
    }
    case Op::append:
    case Op::append_on_close: {
      const auto it = data.find(r.keys[0]);
      const std::size_t now = it == data.end() ? 0 : it->second.size();
      if (now + r.value.size() > store::kMaxBody) {
        drop(id, "append would grow a value past the 64 MiB a frame can carry");
        return;
      }
      if (r.op == Op::append_on_close) {
        c.on_close.emplace_back(std::move(r.keys[0]), std::move(r.value));
        break;
      }
      auto& v = data[r.keys[0]];
      v.insert(v.end(), r.value.begin(), r.value.end());
      resp.value = v;
      reply(c, resp);
      wrote(r.keys[0]);
      return;
    }
    case Op::add: {
      auto& v = data[r.keys[0]];
      std::int64_t cur = 0;
      if (!v.empty()) {
        try {
          cur = std::stoll(to_string(v));
        } catch (...) {
          cur = 0;  // a non-numeric value counts as 0 and is overwritten
        }
      }
      cur += r.num;
      v = to_bytes(std::to_string(cur));
      resp.num = cur;
      reply(c, resp);
      wrote(r.keys[0]);
      return;
    }
    case Op::compare_set: {
      auto it = data.find(r.keys[0]);
      const bool matches = it == data.end() ? r.value.empty() : it->second == r.value;
      if (matches) {
        data[r.keys[0]] = r.value2;
        resp.value = std::move(r.value2);
        reply(c, resp);
        wrote(r.keys[0]);
        return;
      }
      resp.value = it == data.end() ? StoreValue{} : it->second;
      resp.status = it == data.end() ? store::Status::missing : store::Status::ok;
      break;
    }
    case Op::check: {
      resp.num = 1;
      for (const auto& k : r.keys) {
        if (!data.count(k)) resp.num = 0;
      }
      break;
    }
    case Op::remove: resp.num = data.erase(r.keys[0]) ? 1 : 0; break;
    case Op::num_keys: resp.num = static_cast<std::int64_t>(data.size()); break;
    default: drop(id, "unexpected opcode"); return;
  }
  reply(c, resp);
}

const std::string* StoreServer::Impl::missing(Waiter& w, std::string& scratch) const {
  using store::Op;
  if (w.op == Op::get) return data.count(w.keys[0]) ? nullptr : &w.keys[0];
  if (w.op == Op::wait) {
    while (w.next < static_cast<std::int64_t>(w.keys.size()) && data.count(w.keys[w.next])) ++w.next;
    return w.next < static_cast<std::int64_t>(w.keys.size()) ? &w.keys[w.next] : nullptr;
  }
  if (!w.keys[1].empty() && data.count(w.keys[1])) return nullptr;  // stopped
  for (; w.next < w.count; ++w.next) {
    scratch = fmt::format("{}/{}", w.keys[0], w.first + w.next);
    if (!data.count(scratch)) return &scratch;
  }
  return nullptr;
}

// Answers at once when nothing is missing (the caller's loop goes on with
// the client's next request); parks the request otherwise.
void StoreServer::Impl::park(Client& c, Waiter w) {
  std::string scratch;
  const std::string* key = missing(w, scratch);
  if (!key) {
    reply(c, result(w));
    return;
  }
  const std::uint64_t wid = next_waiter++;
  c.waiter = wid;
  watchers[*key].push_back(wid);
  if (w.op == store::Op::get_range && !w.keys[1].empty()) watchers[w.keys[1]].push_back(wid);
  deadlines.emplace(w.deadline, wid);
  waiters.emplace(wid, std::move(w));
}

store::Response StoreServer::Impl::result(const Waiter& w) {
  store::Response resp;
  if (w.op == store::Op::get) {
    resp.value = data[w.keys[0]];
  } else if (w.op == store::Op::get_range) {
    std::vector<const StoreValue*> values(static_cast<std::size_t>(w.count), nullptr);
    std::string key;
    for (std::int64_t i = 0; i < w.count; ++i) {
      key = fmt::format("{}/{}", w.keys[0], w.first + i);
      auto it = data.find(key);
      if (it != data.end()) values[static_cast<std::size_t>(i)] = &it->second;
    }
    store::encode_range(values, resp.value);
  }
  return resp;
}

// Answers a parked request and lets its client go on with what it queued.
void StoreServer::Impl::answer(std::uint64_t wid, bool timed_out) {
  auto wit = waiters.find(wid);
  if (wit == waiters.end()) return;
  Waiter w = std::move(wit->second);
  waiters.erase(wit);
  auto cit = clients.find(w.client);
  if (cit == clients.end() || cit->second.waiter != wid) return;
  Client& c = cit->second;
  c.waiter = 0;
  // A range that timed out still says which keys were there, so that the
  // client can name the missing ones.
  store::Response resp = timed_out && w.op != store::Op::get_range ? store::Response{} : result(w);
  if (timed_out) resp.status = store::Status::timeout;
  reply(c, resp);
  process(w.client, c);
}

// Wakes the waiters that missed `key`; those that now miss another key move
// to that key's list.
void StoreServer::Impl::wrote(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::vector<std::uint64_t> list = std::move(it->second);
  watchers.erase(it);
  std::vector<std::uint64_t> ready;
  std::string scratch;
  for (auto wid : list) {
    auto wit = waiters.find(wid);
    if (wit == waiters.end()) continue;
    const std::string* next = missing(wit->second, scratch);
    if (next) {
      if (*next != key) watchers[*next].push_back(wid);
    } else {
      ready.push_back(wid);
    }
  }
  for (auto wid : ready) answer(wid, false);
}

void StoreServer::Impl::expire() {
  const auto now = Clock::now();
  while (!deadlines.empty() && deadlines.top().first <= now) {
    const auto wid = deadlines.top().second;
    deadlines.pop();
    answer(wid, true);
  }
  while (!unauthed.empty()) {
    auto it = clients.find(unauthed.front().second);
    if (it != clients.end() && !it->second.authed) {
      if (now - unauthed.front().first < kAuthLimit) break;
      drop(unauthed.front().second, "it did not authenticate in time");
    }
    unauthed.pop_front();
  }
  if (!accepting) accept_some();
}

int StoreServer::Impl::next_timeout_ms() {
  while (!deadlines.empty() && !waiters.count(deadlines.top().second)) deadlines.pop();
  std::optional<Clock::time_point> first;
  if (!deadlines.empty()) first = deadlines.top().first;
  if (!unauthed.empty()) {
    // Paused, the next look is when the oldest may be evicted.
    const auto t = unauthed.front().first + (accepting ? kAuthLimit : kEvictAfter);
    first = first ? std::min(*first, t) : t;
  }
  if (!first) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*first - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

void StoreServer::Impl::reply(Client& c, const store::Response& r) {
  store::encode(r, c.out);
  flush(c);
}

void StoreServer::Impl::watch_out(Client& c, bool on) {
  if (c.want_out == on) return;
  c.want_out = on;
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? EPOLLOUT : 0u);
  ev.data.u64 = c.id;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void StoreServer::Impl::flush(Client& c) {
  while (c.out.size() > c.out_off) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out_off += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    break;  // EAGAIN: wait for EPOLLOUT; errors show up as EPOLLERR/HUP
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    if (c.out.capacity() > kReadChunk) StoreValue().swap(c.out);  // so does a big answer's
    c.out_off = 0;
    watch_out(c, false);
    return;
  }
  watch_out(c, true);
  if (c.out.size() - c.out_off > kMaxPendingOut && !c.doomed) {
    c.doomed = true;  // it never reads its answers; the loop drops it
    doomed.push_back(c.id);
  }
}

// The job's clients cannot see whom the store refused; a rank that waits in
// vain for a refused process's keys reads this key when it times out.
void StoreServer::Impl::note_refusal(std::uint64_t id, const char* how) {
  auto it = clients.find(id);
  if (it == clients.end()) return;
  ++refusals;
  const std::string text = fmt::format("{} process(es) that connected {}, the last from {}", refusals, how,
                                       peer_address(it->second.fd.get()));
  data[std::string(store::kRefusedKey)] = StoreValue(text.begin(), text.end());
  wrote(std::string(store::kRefusedKey));
}

void StoreServer::Impl::drop(std::uint64_t id, const char* why) {
  auto it = clients.find(id);
  if (it == clients.end()) return;
  if (why) {
    // A flood is reported, not echoed: the first few, then every power of two.
    const auto n = ++rejected;
    if (n <= 8 || (n & (n - 1)) == 0) {
      log::warn("store server: dropped connection from {}: {} ({} dropped so far)", peer_address(it->second.fd.get()),
                why, n);
    }
  }
  if (!it->second.authed) unauthed_gone();
  if (it->second.waiter) waiters.erase(it->second.waiter);
  auto on_close = std::move(it->second.on_close);
  clients.erase(it);  // closing the socket takes it out of the epoll set
  // After the erase: answering the waiters these writes release may drop
  // other clients, never this one again.
  // Every write first, then the wake-ups: a waiter reads them all at once.
  for (auto& [key, value] : on_close) {
    auto& v = data[key];
    if (v.size() + value.size() <= store::kMaxBody) v.insert(v.end(), value.begin(), value.end());
  }
  for (const auto& kv : on_close) wrote(kv.first);
}

}  // namespace mci
