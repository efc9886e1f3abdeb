// The store client: one connection, one request at a time.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/wire.hpp"

namespace mci {

namespace {
// Extra time granted to the server beyond a request's own timeout before the
// client decides the server itself is gone or frozen: as much again as the
// request's own, from 1 s (a loaded server) to 10 s. A short request fails
// soon when the store's host is unreachable (a cut link answers nothing):
// a lazy connection's address lookup inside a collective asks for 1 ms.
std::chrono::milliseconds server_slack(std::chrono::milliseconds budget) {
  return std::clamp<std::chrono::milliseconds>(budget, std::chrono::seconds(1), std::chrono::seconds(10));
}
// A wait whose deadline has passed asks for 0 ms, not a negative time
// (which the server refuses as malformed, dropping the connection: the
// fault matrix's cut link found a shrink that asked for one).
std::chrono::milliseconds not_negative(std::chrono::milliseconds t) {
  return std::max(t, std::chrono::milliseconds(0));
}
}  // namespace

StoreValue to_bytes(std::string_view s) { return StoreValue(s.begin(), s.end()); }

std::vector<std::optional<StoreValue>> Store::get_range(const std::string& prefix, std::int64_t first,
                                                        std::int64_t count, const std::string& stop,
                                                        std::chrono::milliseconds t) {
  const Deadline dl(t);
  std::vector<std::optional<StoreValue>> out(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    if (!stop.empty() && check({stop})) break;
    out[static_cast<std::size_t>(i)] = get(fmt::format("{}/{}", prefix, first + i), dl.wait_left());
  }
  return out;
}
std::string to_string(const StoreValue& b) { return std::string(b.begin(), b.end()); }

StoreValue Store::append(const std::string& key, const StoreValue& value) {
  // compare_set answers the value it found, so each retry costs one round.
  StoreValue seen = check({key}) ? get(key) : StoreValue{};
  while (true) {
    StoreValue want = seen;
    want.insert(want.end(), value.begin(), value.end());
    StoreValue now = compare_set(key, seen, want);
    if (now == want) return now;
    seen = std::move(now);
  }
}

struct TcpStore::Impl {
  TcpStoreOptions opts;
  Fd fd;  // closed only by the destructor, so interrupt() is safe
  std::atomic<int> raw{-1};
  std::mutex mu;
  bool broken = false;  // guarded by mu: a failed call desynchronised the stream

  std::string where() const { return fmt::format("{}:{}", opts.host, opts.port); }
  // After a wait timed out: whether the store refused processes for their
  // job token (the ones this rank waited for, most likely), as a sentence.
  std::string refusals(const std::string& waited_for) {
    if (waited_for == store::kRefusedKey) return {};
    try {
      store::Request r;
      r.op = store::Op::get;
      r.keys = {std::string(store::kRefusedKey)};
      r.num = 0;
      auto resp = call(r, std::chrono::milliseconds(1000));
      if (resp.status != store::Status::ok || resp.value.empty()) return {};
      return fmt::format(
          ". The store refused {}: a process started with another MCI_JOB_TOKEN (or none) cannot "
          "join, and ranks wait for it in vain; give every rank the same token",
          std::string(resp.value.begin(), resp.value.end()));
    } catch (const std::exception&) {
      return {};  // the timeout itself is the error to report
    }
  }
  store::Response call(const store::Request& req, std::chrono::milliseconds budget);
  store::Response read_response(const Deadline& dl);
  [[noreturn]] void fail(Io io, const Deadline& dl, const char* doing);
};

void TcpStore::Impl::fail(Io io, const Deadline& dl, const char* doing) {
  if (io == Io::timeout) {
    throw TimeoutError(
        fmt::format("Timed out waiting {}ms for the store at {} while {}: the process hosting the store "
                    "(mcirun, or rank 0) is frozen or overloaded",
                    dl.budget().count(), where(), doing));
  }
  throw PeerError(fmt::format("lost the connection to the store at {} while {}: the process "
                              "hosting it (mcirun, or rank 0) exited, or it refused this client "
                              "(wrong or missing MCI_JOB_TOKEN)",
                              where(), doing),
                  -1);
}

store::Response TcpStore::Impl::read_response(const Deadline& dl) {
  std::uint8_t hdr[store::kHeaderSize];
  if (Io io = recv_all(fd.get(), hdr, sizeof hdr, dl); io != Io::ok) fail(io, dl, "reading a reply");
  auto len = store::body_length(std::span<const std::uint8_t, store::kHeaderSize>(hdr, sizeof hdr));
  if (!len) throw PeerError(fmt::format("the store at {} sent a malformed reply", where()), -1);
  StoreValue body(*len);
  if (Io io = recv_all(fd.get(), body.data(), body.size(), dl); io != Io::ok) fail(io, dl, "reading a reply");
  auto resp = store::decode_response(body);
  if (!resp) throw PeerError(fmt::format("the store at {} sent a malformed reply", where()), -1);
  return *resp;
}

store::Response TcpStore::Impl::call(const store::Request& req, std::chrono::milliseconds budget) {
  std::lock_guard lk(mu);
  if (broken) throw PeerError(fmt::format("the connection to the store at {} is closed", where()), -1);
  StoreValue frame;
  store::encode(req, frame);
  Deadline dl(budget + server_slack(budget));
  if (Io io = send_all(fd.get(), frame.data(), frame.size(), dl); io != Io::ok) {
    broken = true;
    fail(io, dl, "sending a request");
  }
  try {
    return read_response(dl);
  } catch (...) {
    broken = true;  // a half-read reply would desynchronise every later call
    throw;
  }
}

TcpStore::TcpStore(const TcpStoreOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = opts;
  set_timeout(opts.timeout);
  Deadline dl(opts.connect_timeout);
  impl_->fd = connect_tcp(opts.host, opts.port, dl, "the store");
  impl_->raw = impl_->fd.get();
  // Handshake: the server's nonce, our proof and nonce, the server's proof.
  store::Response hello = impl_->read_response(dl);
  const bool required = hello.num != 0;
  if (hello.value.size() != sizeof(auth::Nonce)) {
    throw PeerError(fmt::format("the server at {} is not an mci store (bad greeting)", impl_->where()), -1);
  }
  auth::Nonce server_nonce{};
  std::copy(hello.value.begin(), hello.value.end(), server_nonce.begin());
  store::Request a;
  a.op = store::Op::auth;
  auth::Nonce my_nonce = auth::random_nonce();
  if (!opts.token.empty()) {
    auto p = auth::prove(opts.token, "mci-store-client", server_nonce);
    a.value.assign(p.begin(), p.end());
    a.value2.assign(my_nonce.begin(), my_nonce.end());
  }
  StoreValue frame;
  store::encode(a, frame);
  const Io sent = send_all(impl_->fd.get(), frame.data(), frame.size(), dl);
  // Without a token the store refuses us; it was still told, so the job's
  // ranks that wait for this process learn why (see StoreServer).
  if (required && opts.token.empty()) {
    throw ConfigError(
        fmt::format("the store at {} requires the job token: set MCI_JOB_TOKEN to the token of the job "
                    "(mcirun passes it to the processes it starts)",
                    impl_->where()));
  }
  if (sent != Io::ok) impl_->fail(sent, dl, "authenticating");
  store::Response ok;
  try {
    ok = impl_->read_response(dl);
  } catch (const PeerError&) {
    throw ConfigError(fmt::format("the store at {} refused this process: its job token does not match MCI_JOB_TOKEN",
                                  impl_->where()));
  }
  if (!opts.token.empty()) {
    if (!required) {
      throw ConfigError(
          fmt::format("the store at {} does not know the job token in MCI_JOB_TOKEN: it belongs to another "
                      "job, or it was started without the token",
                      impl_->where()));
    }
    auto expect = auth::prove(opts.token, "mci-store-server", my_nonce);
    auth::Proof got{};
    if (ok.value.size() != got.size() ||
        (std::copy(ok.value.begin(), ok.value.end(), got.begin()), !auth::equal(got, expect))) {
      throw ConfigError(
          fmt::format("the store at {} could not prove it holds the job token: another job's store, or a "
                      "stranger, listens on that port",
                      impl_->where()));
    }
  }
}

TcpStore::~TcpStore() = default;

std::shared_ptr<Store> TcpStore::clone() const {
  auto s = std::make_shared<TcpStore>(impl_->opts);
  s->set_timeout(timeout());
  return s;
}

// shutdown() rather than close(): the descriptor stays valid (no reuse race)
// while a recv blocked on it in another thread returns at once.
void TcpStore::interrupt() {
  const int fd = impl_->raw.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

std::string TcpStore::local_address() const { return mci::local_address(impl_->fd.get()); }

bool TcpStore::wait_for_close(std::chrono::milliseconds timeout) {
  std::lock_guard lk(impl_->mu);  // no request in flight: nothing is owed to this client
  pollfd p{impl_->fd.get(), POLLIN | POLLRDHUP, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(timeout.count(), 0)));
  } while (r < 0 && errno == EINTR);
  return r > 0;  // the server hung up (or sent what it never sends unasked)
}

void TcpStore::set(const std::string& key, const StoreValue& value) {
  store::Request r;
  r.op = store::Op::set;
  r.keys = {key};
  r.value = value;
  impl_->call(r, timeout());
}

StoreValue TcpStore::get(const std::string& key, std::chrono::milliseconds t) {
  t = not_negative(t);
  store::Request r;
  r.op = store::Op::get;
  r.keys = {key};
  r.num = t.count();
  auto resp = impl_->call(r, t);
  if (resp.status == store::Status::timeout) {
    throw TimeoutError(fmt::format("Timed out waiting {}ms for store key '{}' at {}{}", t.count(), key, impl_->where(),
                                   impl_->refusals(key)));
  }
  return std::move(resp.value);
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  store::Request r;
  r.op = store::Op::add;
  r.keys = {key};
  r.num = delta;
  return impl_->call(r, timeout()).num;
}

StoreValue TcpStore::compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) {
  store::Request r;
  r.op = store::Op::compare_set;
  r.keys = {key};
  r.value = expected;
  r.value2 = desired;
  return std::move(impl_->call(r, timeout()).value);
}

StoreValue TcpStore::append(const std::string& key, const StoreValue& value) {
  store::Request r;
  r.op = store::Op::append;
  r.keys = {key};
  r.value = value;
  return std::move(impl_->call(r, timeout()).value);
}

bool TcpStore::append_on_close(const std::string& key, const StoreValue& value) {
  store::Request r;
  r.op = store::Op::append_on_close;
  r.keys = {key};
  r.value = value;
  impl_->call(r, timeout());
  return true;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) {
  t = not_negative(t);
  store::Request r;
  r.op = store::Op::wait;
  r.keys = keys;
  r.num = t.count();
  auto resp = impl_->call(r, t);
  if (resp.status == store::Status::timeout) {
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "'" : ", '") + k + "'";
    throw TimeoutError(fmt::format("Timed out waiting {}ms for store keys {} at {}{}", t.count(), list, impl_->where(),
                                   impl_->refusals("")));
  }
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  store::Request r;
  r.op = store::Op::check;
  r.keys = keys;
  return impl_->call(r, timeout()).num != 0;
}

std::vector<std::optional<StoreValue>> TcpStore::get_range(const std::string& prefix, std::int64_t first,
                                                           std::int64_t count, const std::string& stop,
                                                           std::chrono::milliseconds t) {
  t = not_negative(t);
  store::Request r;
  r.op = store::Op::get_range;
  r.keys = {prefix, stop};
  r.first = first;
  r.count = count;
  r.num = t.count();
  auto resp = impl_->call(r, t);
  auto values = store::decode_range(resp.value, count);
  if (resp.status == store::Status::timeout) {
    std::string missing;
    std::int64_t n = 0;
    for (std::int64_t i = 0; values && i < count; ++i) {
      if ((*values)[static_cast<std::size_t>(i)]) continue;
      if (++n <= 8) missing += fmt::format("{}'{}/{}'", missing.empty() ? "" : ", ", prefix, first + i);
    }
    if (n > 8) missing += ", ...";
    throw TimeoutError(fmt::format("Timed out waiting {}ms for store keys {} ({} of {} missing) at {}{}", t.count(),
                                   missing.empty()
                                       ? fmt::format("'{}/{}' .. '{}/{}'", prefix, first, prefix, first + count - 1)
                                       : missing,
                                   n, count, impl_->where(), impl_->refusals("")));
  }
  if (!values) throw PeerError(fmt::format("the store at {} sent a malformed range reply", impl_->where()), -1);
  return std::move(*values);
}

bool TcpStore::remove(const std::string& key) {
  store::Request r;
  r.op = store::Op::remove;
  r.keys = {key};
  return impl_->call(r, timeout()).num != 0;
}

std::int64_t TcpStore::num_keys() {
  store::Request r;
  r.op = store::Op::num_keys;
  return impl_->call(r, timeout()).num;
}

}  // namespace mci
