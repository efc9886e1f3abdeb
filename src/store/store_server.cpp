// The store server: one thread, one poll loop, every client non-blocking.
// Requests that must wait (get, wait) are parked and answered when their
// keys appear or their deadline passes; a client that sends a malformed
// frame, fails authentication or stops reading is dropped, and nothing else.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <cerrno>
#include <list>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/wire.hpp"

namespace mci {

namespace {

constexpr std::size_t kMaxPendingOut = 256u << 20;  // a client that stops reading is dropped

struct Client {
  Fd fd;
  StoreValue in;
  StoreValue out;
  std::size_t out_off = 0;
  bool authed = false;
  bool parked = false;
  bool doomed = false;  // dropped by the loop: too much unread output
  auth::Nonce nonce{};
};

struct Waiter {
  std::uint64_t client;
  store::Op op;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

}  // namespace

struct StoreServer::Impl {
  std::string host;
  std::string token;
  Fd listener;
  int port = 0;
  Fd wake_read, wake_write;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> rejected{0};
  std::thread thread;

  // Owned by the server thread only.
  std::map<std::uint64_t, Client> clients;
  std::unordered_map<std::string, StoreValue> data;
  std::list<Waiter> waiters;
  std::uint64_t next_id = 1;

  void run();
  void accept_all();
  void on_readable(std::uint64_t id, Client& c);
  void process(std::uint64_t id, Client& c);
  void handle(std::uint64_t id, Client& c, store::Request& r);
  void reply(Client& c, const store::Response& r);
  void flush(Client& c);
  void drop(std::uint64_t id, const char* why);
  void note_refusal(std::uint64_t id, const char* how);
  std::uint64_t refusals = 0;
  bool all_present(const std::vector<std::string>& keys) const;
  void wake_waiters();
  void expire_waiters();
  int next_timeout_ms() const;
};

StoreServer::StoreServer(const StoreServerOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->host = opts.host;
  impl_->token = opts.token;
  impl_->listener = listen_tcp(opts.host, opts.port);
  set_nonblocking(impl_->listener.get());
  impl_->port = local_port(impl_->listener.get());
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("mci store: pipe2 failed");
  impl_->wake_read.reset(p[0]);
  impl_->wake_write.reset(p[1]);
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
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (!stopping) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    fds.push_back({listener.get(), POLLIN, 0});
    for (auto& [id, c] : clients) {
      short ev = POLLIN;
      if (c.out.size() > c.out_off) ev |= POLLOUT;
      fds.push_back({c.fd.get(), ev, 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), next_timeout_ms());
    if (n < 0 && errno != EINTR) {
      log::error("store server: poll failed: {}", std::strerror(errno));
      return;
    }
    if (stopping) return;
    if (fds[1].revents & POLLIN) accept_all();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = clients.find(ids[i]);
      if (it == clients.end()) continue;
      const short re = fds[i + 2].revents;
      if (re & (POLLERR | POLLNVAL)) {
        drop(ids[i], nullptr);
        continue;
      }
      if (re & POLLOUT) flush(it->second);
      it = clients.find(ids[i]);
      if (it == clients.end()) continue;
      if (re & (POLLIN | POLLHUP)) on_readable(ids[i], it->second);
    }
    expire_waiters();
    for (auto it = clients.begin(); it != clients.end();) {
      auto next = std::next(it);
      if (it->second.doomed) drop(it->first, "it stopped reading its answers");
      it = next;
    }
  }
}

void StoreServer::Impl::accept_all() {
  while (true) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    set_nodelay(fd);
    Client c;
    c.fd.reset(fd);
    c.nonce = auth::random_nonce();
    store::Response hello;
    hello.value.assign(c.nonce.begin(), c.nonce.end());
    hello.num = token.empty() ? 0 : 1;
    const std::uint64_t id = next_id++;
    auto [it, ok] = clients.emplace(id, std::move(c));
    reply(it->second, hello);
  }
}

void StoreServer::Impl::on_readable(std::uint64_t id, Client& c) {
  std::uint8_t buf[65536];
  while (true) {
    ssize_t r = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      c.in.insert(c.in.end(), buf, buf + r);
      if (c.in.size() > store::kMaxBody + store::kHeaderSize) break;
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      // What it sent before leaving still counts (a refused process's
      // proof-less auth, which its peers should hear about); then it goes,
      // and its parked requests with it (drop is a no-op if process did it).
      if (!c.in.empty()) process(id, c);
      drop(id, nullptr);
      return;
    }
    if (errno == EINTR) continue;
    break;
  }
  process(id, c);
}

void StoreServer::Impl::process(std::uint64_t id, Client& c) {
  std::size_t off = 0;
  while (!c.parked && !c.doomed && c.in.size() - off >= store::kHeaderSize) {
    auto len = store::body_length(std::span<const std::uint8_t, store::kHeaderSize>(
        c.in.data() + off, store::kHeaderSize));
    if (!len) {
      drop(id, "malformed frame header (bad magic or oversized body)");
      return;
    }
    if (c.in.size() - off < store::kHeaderSize + *len) break;
    auto req = store::decode_request(
        std::span<const std::uint8_t>(c.in.data() + off + store::kHeaderSize, *len));
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
      if (!token.empty()) {
        auth::Proof got{};
        if (r.value.size() != got.size()) {
          note_refusal(id, "without a job token");
          drop(id, "no job token proof (set MCI_JOB_TOKEN to the job's token)");
          return;
        }
        std::copy(r.value.begin(), r.value.end(), got.begin());
        if (!auth::equal(got, auth::prove(token, "mci-store-client", c.nonce))) {
          note_refusal(id, "with another job token");
          drop(id, "wrong job token proof");
          return;
        }
        if (r.value2.size() == sizeof(auth::Nonce)) {
          auth::Nonce cn{};
          std::copy(r.value2.begin(), r.value2.end(), cn.begin());
          auto p = auth::prove(token, "mci-store-server", cn);
          resp.value.assign(p.begin(), p.end());
        }
      }
      c.authed = true;
      break;
    }
    case Op::set:
      data[r.keys[0]] = std::move(r.value);
      reply(c, resp);
      wake_waiters();
      return;
    case Op::get: {
      auto it = data.find(r.keys[0]);
      if (it != data.end()) {
        resp.value = it->second;
        break;
      }
      c.parked = true;
      waiters.push_back({id, Op::get, std::move(r.keys), Clock::now() + std::chrono::milliseconds(r.num)});
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
      wake_waiters();
      return;
    }
    case Op::compare_set: {
      auto it = data.find(r.keys[0]);
      const bool matches = it == data.end() ? r.value.empty() : it->second == r.value;
      if (matches) {
        data[r.keys[0]] = r.value2;
        resp.value = std::move(r.value2);
        reply(c, resp);
        wake_waiters();
        return;
      }
      resp.value = it == data.end() ? StoreValue{} : it->second;
      resp.status = it == data.end() ? store::Status::missing : store::Status::ok;
      break;
    }
    case Op::wait:
      if (all_present(r.keys)) break;
      c.parked = true;
      waiters.push_back({id, Op::wait, std::move(r.keys), Clock::now() + std::chrono::milliseconds(r.num)});
      return;
    case Op::check:
      resp.num = all_present(r.keys) ? 1 : 0;
      break;
    case Op::remove:
      resp.num = data.erase(r.keys[0]) ? 1 : 0;
      break;
    case Op::num_keys:
      resp.num = static_cast<std::int64_t>(data.size());
      break;
    default:
      drop(id, "unexpected opcode");
      return;
  }
  reply(c, resp);
}

void StoreServer::Impl::reply(Client& c, const store::Response& r) {
  store::encode(r, c.out);
  flush(c);
}

void StoreServer::Impl::flush(Client& c) {
  while (c.out.size() > c.out_off) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out_off += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    break;  // EAGAIN: poll for POLLOUT; errors show up as POLLERR/HUP
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  } else if (c.out.size() - c.out_off > kMaxPendingOut) {
    c.doomed = true;  // it never reads its answers; the loop drops it
  }
}

// The job's clients cannot see whom the store refused; a rank that waits in
// vain for a refused process's keys reads this key when it times out.
void StoreServer::Impl::note_refusal(std::uint64_t id, const char* how) {
  auto it = clients.find(id);
  if (it == clients.end()) return;
  ++refusals;
  const std::string text =
      fmt::format("{} process(es) that connected {}, the last from {}", refusals, how, peer_address(it->second.fd.get()));
  data[std::string(store::kRefusedKey)] = StoreValue(text.begin(), text.end());
}

void StoreServer::Impl::drop(std::uint64_t id, const char* why) {
  auto it = clients.find(id);
  if (it == clients.end()) return;
  if (why) {
    ++rejected;
    log::warn("store server: dropped connection from {}: {}", peer_address(it->second.fd.get()), why);
  }
  waiters.remove_if([id](const Waiter& w) { return w.client == id; });
  clients.erase(it);
}

bool StoreServer::Impl::all_present(const std::vector<std::string>& keys) const {
  for (const auto& k : keys) {
    if (!data.count(k)) return false;
  }
  return true;
}

// Ready waiters are taken off the list before anyone is answered: answering
// resumes the client's queued requests, which may set keys and re-enter here.
void StoreServer::Impl::wake_waiters() {
  std::vector<Waiter> ready;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (all_present(it->keys)) {
      ready.push_back(std::move(*it));
      it = waiters.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& w : ready) {
    auto cit = clients.find(w.client);
    if (cit == clients.end()) continue;
    store::Response resp;
    if (w.op == store::Op::get) resp.value = data[w.keys[0]];
    cit->second.parked = false;
    reply(cit->second, resp);
    process(w.client, cit->second);
  }
}

void StoreServer::Impl::expire_waiters() {
  const auto now = Clock::now();
  std::vector<std::uint64_t> expired;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->deadline <= now) {
      expired.push_back(it->client);
      it = waiters.erase(it);
    } else {
      ++it;
    }
  }
  for (auto id : expired) {
    auto cit = clients.find(id);
    if (cit == clients.end()) continue;
    store::Response resp;
    resp.status = store::Status::timeout;
    cit->second.parked = false;
    reply(cit->second, resp);
    process(id, cit->second);
  }
}

int StoreServer::Impl::next_timeout_ms() const {
  if (waiters.empty()) return -1;
  auto first = waiters.front().deadline;
  for (const auto& w : waiters) first = std::min(first, w.deadline);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

}  // namespace mci
