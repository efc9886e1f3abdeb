#include "store_load.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/socket.hpp"
#include "store/wire.hpp"

namespace mci::test {

namespace {

using Clock = std::chrono::steady_clock;

enum Step { kHello, kAuth, kSet, kAdd, kGet, kWait };

struct Sim {
  int index = 0;
  Fd fd;
  bool connected = false;
  StoreValue in;
  StoreValue out;
  std::size_t out_off = 0;
  Step step = kHello;
  int round = 0;
  Clock::time_point sent;
  auth::Nonce nonce{};
  bool over = false;
};

class Worker {
 public:
  Worker(const StoreLoadOptions& o, int first, int count, Clock::time_point until)
      : o_(o), until_(until), sims_(static_cast<std::size_t>(count)) {
    for (int k = 0; k < count; ++k) sims_[static_cast<std::size_t>(k)].index = first + k;
  }

  void run() {
    Fd ep(::epoll_create1(EPOLL_CLOEXEC));
    for (std::size_t k = 0; k < sims_.size(); ++k) {
      Sim& s = sims_[k];
      std::string error;
      s.fd = connect_start(o_.host, o_.port, error);
      if (!s.fd.valid()) {
        fail(s, "connect: " + error);
        continue;
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
      ev.data.u64 = k;
      ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, s.fd.get(), &ev);
    }
    std::vector<epoll_event> events(512);
    while (live_ > 0 && Clock::now() < until_) {
      const int n = ::epoll_wait(ep.get(), events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) on_event(sims_[events[i].data.u64]);
    }
    result.unfinished = live_;
  }

  StoreLoadResult result;

 private:
  std::string key(int client, int round) const {
    const int n = o_.clients;
    return fmt::format("{}/{}/{}", o_.prefix, round, ((client % n) + n) % n);
  }
  std::string value(int client, int round) const {
    return fmt::format("v{}.{}", ((client % o_.clients) + o_.clients) % o_.clients, round);
  }

  void fail(Sim& s, const std::string& why) {
    if (s.over) return;
    s.over = true;
    --live_;
    ++result.failed;
    if (result.errors.size() < 5) result.errors.push_back(fmt::format("client {}: {}", s.index, why));
    s.fd.reset();
  }

  void send(Sim& s, const store::Request& r) {
    store::encode(r, s.out);
    s.sent = Clock::now();
    ++result.requests;
    flush(s);
  }

  void flush(Sim& s) {
    while (s.out_off < s.out.size()) {
      const ssize_t w = ::send(s.fd.get(), s.out.data() + s.out_off, s.out.size() - s.out_off, MSG_NOSIGNAL);
      if (w > 0) {
        s.out_off += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      fail(s, fmt::format("send: {}", std::strerror(errno)));
      return;
    }
    s.out.clear();
    s.out_off = 0;
  }

  void on_event(Sim& s) {
    if (s.over) return;
    if (!s.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return fail(s, fmt::format("connect: {}", std::strerror(err)));
      s.connected = true;
    }
    flush(s);
    std::uint8_t buf[4096];
    while (!s.over) {
      const ssize_t r = ::recv(s.fd.get(), buf, sizeof buf, 0);
      if (r > 0) {
        s.in.insert(s.in.end(), buf, buf + r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return fail(s, r == 0 ? "the store closed the connection" : fmt::format("recv: {}", std::strerror(errno)));
    }
    while (!s.over && s.in.size() >= store::kHeaderSize) {
      const auto len =
          store::body_length(std::span<const std::uint8_t, store::kHeaderSize>(s.in.data(), store::kHeaderSize));
      if (!len) return fail(s, "malformed frame from the store");
      if (s.in.size() < store::kHeaderSize + *len) break;
      auto resp = store::decode_response(std::span<const std::uint8_t>(s.in.data() + store::kHeaderSize, *len));
      s.in.erase(s.in.begin(), s.in.begin() + static_cast<std::ptrdiff_t>(store::kHeaderSize + *len));
      if (!resp) return fail(s, "malformed reply from the store");
      on_reply(s, *resp);
    }
  }

  void on_reply(Sim& s, const store::Response& r) {
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - s.sent).count();
    store::Request q;
    switch (s.step) {
      case kHello: {
        if (r.value.size() != s.nonce.size()) return fail(s, "bad greeting");
        auth::Nonce server{};
        std::copy(r.value.begin(), r.value.end(), server.begin());
        s.nonce = auth::random_nonce();
        q.op = store::Op::auth;
        if (!o_.token.empty()) {
          const auto p = auth::prove(o_.token, "mci-store-client", server);
          q.value.assign(p.begin(), p.end());
          q.value2.assign(s.nonce.begin(), s.nonce.end());
        }
        s.step = kAuth;
        return send(s, q);
      }
      case kAuth:
        if (!o_.token.empty()) {
          auth::Proof got{};
          if (r.value.size() != got.size()) return fail(s, "the store did not prove the token");
          std::copy(r.value.begin(), r.value.end(), got.begin());
          if (!auth::equal(got, auth::prove(o_.token, "mci-store-server", s.nonce))) {
            return fail(s, "the store's proof is wrong");
          }
        }
        break;
      case kSet:
      case kAdd:
        result.immediate_us.push_back(us);
        if (r.status != store::Status::ok) return fail(s, "set/add refused");
        if (s.step == kAdd && (r.num < 1 || r.num > o_.clients)) {
          return fail(s, fmt::format("add returned {} (expected 1..{})", r.num, o_.clients));
        }
        break;
      case kGet:
      case kWait:
        result.waiting_us.push_back(us);
        if (r.status != store::Status::ok) return fail(s, "get/wait timed out");
        if (s.step == kGet && to_string(r.value) != value(s.index + 1, s.round)) {
          return fail(s,
                      fmt::format("get returned '{}', expected '{}'", to_string(r.value), value(s.index + 1, s.round)));
        }
        break;
    }
    // The next request of this client's script.
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until_ - Clock::now()).count();
    switch (s.step) {
      case kAuth:
      case kWait:
        if (s.step == kWait && ++s.round == o_.rounds) {
          s.over = true;
          --live_;
          ++result.finished;
          s.fd.reset();
          return;
        }
        s.step = kSet;
        q.op = store::Op::set;
        q.keys = {key(s.index, s.round)};
        q.value = to_bytes(value(s.index, s.round));
        break;
      case kSet:
        s.step = kAdd;
        q.op = store::Op::add;
        q.keys = {fmt::format("{}/count/{}", o_.prefix, s.round)};
        q.num = 1;
        break;
      case kAdd:
        s.step = kGet;
        q.op = store::Op::get;
        q.keys = {key(s.index + 1, s.round)};
        q.num = std::max<long long>(wait_ms, 1);
        break;
      case kGet:
        s.step = kWait;
        q.op = store::Op::wait;
        q.keys = {key(s.index - 1, s.round), key(s.index + 7, s.round)};
        q.num = std::max<long long>(wait_ms, 1);
        break;
      case kHello: break;
    }
    send(s, q);
  }

  const StoreLoadOptions& o_;
  Clock::time_point until_;
  std::vector<Sim> sims_;
  int live_ = static_cast<int>(sims_.size());
};

}  // namespace

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(
      std::min<double>(std::ceil(q * static_cast<double>(v.size())) - 1, static_cast<double>(v.size() - 1)));
  return v[std::max<std::size_t>(i, 0)];
}

StoreLoadResult run_store_load(const StoreLoadOptions& o) {
  const auto t0 = Clock::now();
  const auto until = t0 + o.limit;
  std::vector<std::unique_ptr<Worker>> workers;
  const int per = (o.clients + o.threads - 1) / o.threads;
  for (int first = 0; first < o.clients; first += per) {
    workers.push_back(std::make_unique<Worker>(o, first, std::min(per, o.clients - first), until));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->run(); });
  for (auto& t : threads) t.join();
  StoreLoadResult all;
  for (auto& w : workers) {
    auto& r = w->result;
    all.finished += r.finished;
    all.failed += r.failed;
    all.unfinished += r.unfinished;
    all.requests += r.requests;
    for (auto& e : r.errors) {
      if (all.errors.size() < 5) all.errors.push_back(e);
    }
    all.immediate_us.insert(all.immediate_us.end(), r.immediate_us.begin(), r.immediate_us.end());
    all.waiting_us.insert(all.waiting_us.end(), r.waiting_us.begin(), r.waiting_us.end());
  }
  all.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return all;
}

int stranger_flood(const std::string& host, int port, std::chrono::milliseconds duration, int max_open) {
  const auto until = Clock::now() + duration;
  std::vector<Fd> held;
  int opened = 0;
  StoreValue early;
  store::Request r;
  r.op = store::Op::get;
  r.keys = {"load/0/0"};
  store::encode(r, early);
  const std::string junk(300, 'x');
  while (Clock::now() < until && opened < max_open) {
    std::string error;
    Fd fd = connect_start(host, port, error);
    if (!fd.valid()) continue;
    ++opened;
    // Give the connect a moment: the bytes go out once it is made.
    pollfd p{fd.get(), POLLOUT, 0};
    ::poll(&p, 1, 100);
    switch (opened % 3) {
      case 0:
        held.push_back(std::move(fd));  // silent: holds a slot until the store drops it
        break;
      case 1:
        (void)::send(fd.get(), junk.data(), junk.size(), MSG_NOSIGNAL);
        held.push_back(std::move(fd));
        break;
      default:
        (void)::send(fd.get(), early.data(), early.size(), MSG_NOSIGNAL);
        held.push_back(std::move(fd));
        break;
    }
  }
  return opened;
}

}  // namespace mci::test
