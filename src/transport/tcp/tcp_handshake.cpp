#include "transport/tcp/tcp_handshake.hpp"

#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/net_interfaces.hpp"

namespace mci::transport {

namespace {

constexpr std::uint32_t kHandshakeMagic = 0x4849434du;  // "MCIH"

enum Verdict : std::int32_t { kAccepted = 0, kMineWins = 1 };

struct Challenge {
  std::uint32_t magic;
  std::uint8_t nonce[32];
};

struct Hello {
  std::uint32_t magic;
  std::int32_t rank;
  std::uint8_t session[32];
  std::uint8_t proof[32];
  std::uint8_t nonce[32];
};

struct Welcome {
  std::uint32_t magic;
  std::int32_t rank;
  std::int32_t verdict;
  std::uint8_t proof[32];
};

constexpr std::size_t size_of(int m) { return m == 0 ? sizeof(Challenge) : m == 1 ? sizeof(Hello) : sizeof(Welcome); }

}  // namespace

LinkIdentity link_identity(int rank, int size, const std::string& session, const std::string& token) {
  LinkIdentity id;
  id.rank = rank;
  id.size = size;
  id.token = token;
  SHA256(reinterpret_cast<const unsigned char*>(session.data()), session.size(), id.session.data());
  return id;
}

namespace {

// " (from interface eth0, 10.0.0.5)": where this host sends to `host`.
std::string route_text(const std::string& host) {
  const auto r = route_toward(host);
  if (!r) return " (no route from this host)";
  return r->interface.empty() ? fmt::format(" (from {})", r->address)
                              : fmt::format(" (from interface {}, {})", r->interface, r->address);
}

}  // namespace

Handshake Handshake::dial(const LinkIdentity& me, int peer, const std::string& addr) {
  Handshake h;
  h.me_ = me;
  h.peer_ = peer;
  h.dialled_ = true;
  h.addr_ = addr;
  const auto colon = addr.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(addr.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port <= 0 || port > 65535) {
    h.fail(fmt::format("rank {} published a malformed address '{}'", peer, addr));
    return h;
  }
  std::string error;
  h.fd_ = connect_start(addr.substr(0, colon), port, error);
  if (!h.fd_.valid()) {
    h.fail(
        fmt::format("rank {} could not reach rank {} at {}: {}: the process exited, crashed or left the group. "
                    "Check that rank's output for the cause.",
                    me.rank, peer, addr, error));
    return h;
  }
  h.stage_ = Stage::connecting;
  h.expect(Msg::challenge);
  return h;
}

Handshake Handshake::answer(const LinkIdentity& me, Fd fd) {
  Handshake h;
  h.me_ = me;
  h.fd_ = std::move(fd);
  set_nonblocking(h.fd_.get());
  h.my_nonce_ = auth::random_nonce();
  Challenge ch{};
  ch.magic = kHandshakeMagic;
  std::memcpy(ch.nonce, h.my_nonce_.data(), sizeof ch.nonce);
  h.put(Msg::challenge, &ch, sizeof ch);
  return h;
}

void Handshake::expect(Msg m) {
  msg_ = m;
  len_ = size_of(static_cast<int>(m));
  off_ = 0;
  if (stage_ != Stage::connecting) stage_ = Stage::recv;
}

void Handshake::put(Msg m, const void* data, std::size_t n) {
  msg_ = m;
  std::memcpy(buf_.data(), data, n);
  len_ = n;
  off_ = 0;
  stage_ = Stage::send;
}

short Handshake::events() const {
  if (stage_ == Stage::connecting || stage_ == Stage::send) return POLLOUT;
  return POLLIN;
}

std::string Handshake::stage() const {
  if (!error_.empty()) return error_;
  if (stage_ == Stage::connecting) return fmt::format("connecting to rank {} at {}", peer_, addr_);
  return fmt::format("handshake with rank {} at {} unanswered (it is not started, not inside mci, or unreachable)",
                     peer_, addr_);
}

Handshake::Result Handshake::fail(std::string why) {
  error_ = std::move(why);
  stage_ = Stage::done;
  fd_.reset();
  return Result::failed;
}

Handshake::Result Handshake::advance(const std::function<bool(int)>& dial_wins) {
  if (stage_ == Stage::done) return error_.empty() ? Result::pending : Result::failed;
  if (stage_ == Stage::connecting) {
    pollfd p{fd_.get(), POLLOUT, 0};
    if (::poll(&p, 1, 0) == 0) return Result::pending;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    // The peer's port, free since it exited, was given to this very dial.
    if (err == 0 && connected_to_itself(fd_.get())) err = ECONNREFUSED;
    if (err != 0) {
      const bool unreachable = err == EHOSTUNREACH || err == ENETUNREACH || err == ETIMEDOUT;
      const std::string host = addr_.substr(0, addr_.rfind(':'));
      return fail(fmt::format(
          "rank {} could not reach rank {} at {}{}: {}: {}", me_.rank, peer_, addr_, route_text(host),
          std::strerror(err),
          unreachable ? "this host has no working path to that address: where hosts have several networks, name the "
                        "one the ranks share with MCI_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME), on every rank"
                      : "the process exited, crashed or left the group. Check that rank's output for the cause."));
    }
    set_nodelay(fd_.get());
    stage_ = Stage::recv;
  }
  while (stage_ == Stage::send || stage_ == Stage::recv) {
    ssize_t r = stage_ == Stage::send ? ::send(fd_.get(), buf_.data() + off_, len_ - off_, MSG_NOSIGNAL | MSG_DONTWAIT)
                                      : ::recv(fd_.get(), buf_.data() + off_, len_ - off_, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Result::pending;
    if (r <= 0) {
      if (!dialled_) return Result::refused;
      if (msg_ == Msg::welcome) {
        return fail(
            fmt::format("rank {} was refused by rank {} at {}: different job token or group", me_.rank, peer_, addr_));
      }
      return fail(
          fmt::format("rank {} lost the connection to rank {} at {} during the handshake: the process "
                      "exited, crashed or left the group. Check that rank's output for the cause.",
                      me_.rank, peer_, addr_));
    }
    off_ += static_cast<std::size_t>(r);
    if (off_ < len_) continue;
    const Result res = stage_ == Stage::send ? on_sent() : on_received(dial_wins);
    if (res != Result::pending) return res;
  }
  return Result::pending;
}

Handshake::Result Handshake::on_sent() {
  if (dialled_) {
    expect(Msg::welcome);  // after our hello
    return Result::pending;
  }
  if (msg_ == Msg::challenge) {
    expect(Msg::hello);
    return Result::pending;
  }
  stage_ = Stage::done;  // our welcome is out
  Welcome w{};
  std::memcpy(&w, buf_.data(), sizeof w);
  return w.verdict == kAccepted ? Result::up : Result::yielded;
}

Handshake::Result Handshake::on_received(const std::function<bool(int)>& dial_wins) {
  const bool token = !me_.token.empty();
  if (msg_ == Msg::challenge) {
    Challenge ch{};
    std::memcpy(&ch, buf_.data(), sizeof ch);
    if (ch.magic != kHandshakeMagic) {
      return fail(
          fmt::format("rank {} could not greet rank {} at {}: no valid challenge (another program listens "
                      "there)",
                      me_.rank, peer_, addr_));
    }
    std::memcpy(their_nonce_.data(), ch.nonce, their_nonce_.size());
    my_nonce_ = auth::random_nonce();
    Hello hello{};
    hello.magic = kHandshakeMagic;
    hello.rank = me_.rank;
    std::memcpy(hello.session, me_.session.data(), sizeof hello.session);
    std::memcpy(hello.nonce, my_nonce_.data(), sizeof hello.nonce);
    if (token) {
      const auto p = auth::prove(me_.token, "mci-data-connector", their_nonce_);
      std::memcpy(hello.proof, p.data(), p.size());
    }
    put(Msg::hello, &hello, sizeof hello);
    return Result::pending;
  }
  if (msg_ == Msg::welcome) {
    Welcome w{};
    std::memcpy(&w, buf_.data(), sizeof w);
    if (w.magic != kHandshakeMagic || w.rank != peer_ || (w.verdict != kAccepted && w.verdict != kMineWins)) {
      return fail(
          fmt::format("rank {} was refused by rank {} at {}: different job token or group", me_.rank, peer_, addr_));
    }
    if (token) {
      auth::Proof got{};
      std::memcpy(got.data(), w.proof, got.size());
      if (!auth::equal(got, auth::prove(me_.token, "mci-data-acceptor", my_nonce_))) {
        return fail(fmt::format("the process at {} claiming to be rank {} does not hold the job token", addr_, peer_));
      }
    }
    stage_ = Stage::done;
    return w.verdict == kAccepted ? Result::up : Result::yielded;
  }
  // The acceptor has the connector's hello.
  Hello hello{};
  std::memcpy(&hello, buf_.data(), sizeof hello);
  if (hello.magic != kHandshakeMagic || hello.rank < 0 || hello.rank >= me_.size || hello.rank == me_.rank ||
      std::memcmp(hello.session, me_.session.data(), sizeof hello.session) != 0) {
    stranger_ = true;
    return Result::refused;
  }
  if (token) {
    auth::Proof got{};
    std::memcpy(got.data(), hello.proof, got.size());
    if (!auth::equal(got, auth::prove(me_.token, "mci-data-connector", my_nonce_))) {
      stranger_ = true;
      return Result::refused;
    }
  }
  peer_ = hello.rank;
  Welcome w{};
  w.magic = kHandshakeMagic;
  w.rank = me_.rank;
  w.verdict = dial_wins(peer_) ? kMineWins : kAccepted;
  if (token) {
    std::memcpy(their_nonce_.data(), hello.nonce, their_nonce_.size());
    const auto p = auth::prove(me_.token, "mci-data-acceptor", their_nonce_);
    std::memcpy(w.proof, p.data(), p.size());
  }
  put(Msg::welcome, &w, sizeof w);
  return Result::pending;
}

}  // namespace mci::transport
