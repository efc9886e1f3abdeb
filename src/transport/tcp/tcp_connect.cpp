// Building the TCP mesh. Each connection starts with a handshake: the
// acceptor sends a nonce; the connector answers with its rank, a hash of the
// group session and an HMAC of the nonce under the job token; the acceptor
// answers with its own proof. Strangers are dropped without disturbing the
// job.
#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/log.hpp"
#include "mci/errors.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace mci::transport {

namespace {

constexpr std::uint32_t kHandshakeMagic = 0x4849434du;  // "MCIH"
// A stranger that connects and says nothing must not stall the job.
constexpr auto kHandshakeLimit = std::chrono::seconds(10);

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
  std::uint8_t proof[32];
};

std::array<std::uint8_t, 32> session_hash(const std::string& session) {
  std::array<std::uint8_t, 32> h{};
  SHA256(reinterpret_cast<const unsigned char*>(session.data()), session.size(), h.data());
  return h;
}

Deadline handshake_deadline(const Deadline& dl) {
  auto limit = Clock::now() + kHandshakeLimit;
  return Deadline(std::min(limit, dl.at()), dl.budget());
}

// Connector side. Returns an empty Fd if the acceptor refused us.
Fd connect_to(int me, int peer, const std::string& addr, const std::string& session,
              const std::string& token, const Deadline& dl) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    throw Error(fmt::format("mci: rank {} published a malformed address '{}'", peer, addr));
  }
  const std::string host = addr.substr(0, colon);
  const int port = std::stoi(addr.substr(colon + 1));
  Fd fd = connect_tcp(host, port, dl, fmt::format("rank {}", peer));
  Challenge ch{};
  if (recv_all(fd.get(), &ch, sizeof ch, dl) != Io::ok || ch.magic != kHandshakeMagic) {
    throw PeerError(fmt::format("rank {} could not greet rank {} at {}: no valid challenge", me, peer, addr), peer);
  }
  Hello hello{};
  hello.magic = kHandshakeMagic;
  hello.rank = me;
  auto sh = session_hash(session);
  std::memcpy(hello.session, sh.data(), sh.size());
  auth::Nonce nonce_a{};
  std::memcpy(nonce_a.data(), ch.nonce, nonce_a.size());
  auth::Nonce nonce_c = auth::random_nonce();
  std::memcpy(hello.nonce, nonce_c.data(), nonce_c.size());
  if (!token.empty()) {
    auto p = auth::prove(token, "mci-data-connector", nonce_a);
    std::memcpy(hello.proof, p.data(), p.size());
  }
  if (send_all(fd.get(), &hello, sizeof hello, dl) != Io::ok) {
    throw PeerError(fmt::format("rank {} lost the connection to rank {} during the handshake", me, peer), peer);
  }
  Welcome w{};
  if (recv_all(fd.get(), &w, sizeof w, dl) != Io::ok || w.magic != kHandshakeMagic || w.rank != peer) {
    throw PeerError(fmt::format("rank {} was refused by rank {} at {}: different job token or group",
                                me, peer, addr),
                    peer);
  }
  if (!token.empty()) {
    auth::Proof got{};
    std::memcpy(got.data(), w.proof, got.size());
    if (!auth::equal(got, auth::prove(token, "mci-data-acceptor", nonce_c))) {
      throw PeerError(fmt::format("the process at {} claiming to be rank {} does not hold the job "
                                  "token",
                                  addr, peer),
                      peer);
    }
  }
  return fd;
}

// Acceptor side: returns the connector's rank, or -1 for a stranger.
int greet(Fd& fd, int me, int size, const std::string& session, const std::string& token,
          const Deadline& dl) {
  Challenge ch{};
  ch.magic = kHandshakeMagic;
  auth::Nonce nonce_a = auth::random_nonce();
  std::memcpy(ch.nonce, nonce_a.data(), nonce_a.size());
  const Deadline hd = handshake_deadline(dl);
  if (send_all(fd.get(), &ch, sizeof ch, hd) != Io::ok) return -1;
  Hello hello{};
  if (recv_all(fd.get(), &hello, sizeof hello, hd) != Io::ok) return -1;
  if (hello.magic != kHandshakeMagic || hello.rank <= me || hello.rank >= size) return -1;
  auto sh = session_hash(session);
  if (std::memcmp(hello.session, sh.data(), sh.size()) != 0) return -1;
  if (!token.empty()) {
    auth::Proof got{};
    std::memcpy(got.data(), hello.proof, got.size());
    if (!auth::equal(got, auth::prove(token, "mci-data-connector", nonce_a))) return -1;
  }
  Welcome w{};
  w.magic = kHandshakeMagic;
  w.rank = me;
  if (!token.empty()) {
    auth::Nonce nonce_c{};
    std::memcpy(nonce_c.data(), hello.nonce, nonce_c.size());
    auto p = auth::prove(token, "mci-data-acceptor", nonce_c);
    std::memcpy(w.proof, p.data(), p.size());
  }
  if (send_all(fd.get(), &w, sizeof w, hd) != Io::ok) return -1;
  return hello.rank;
}

}  // namespace

std::unique_ptr<TcpTransport> connect_tcp_mesh(Store& store, int rank, int size,
                                               const std::string& listen_host,
                                               const std::string& session,
                                               const std::string& token, const Deadline& dl,
                                               std::chrono::nanoseconds spin,
                                               std::chrono::nanoseconds yield) {
  std::vector<Fd> peers(static_cast<std::size_t>(size));
  if (size == 1) return std::make_unique<TcpTransport>(rank, size, std::move(peers), spin, yield);

  Fd listener = listen_tcp(listen_host, 0);
  set_nonblocking(listener.get());
  const std::string me = fmt::format("{}:{}", listen_host, local_port(listener.get()));
  store.set(fmt::format("tcp/addr/{}", rank), to_bytes(me));

  for (int j = 0; j < rank; ++j) {
    const std::string addr = to_string(store.get(fmt::format("tcp/addr/{}", j), dl.wait_left()));
    peers[j] = connect_to(rank, j, addr, session, token, dl);
  }
  int missing = size - 1 - rank;
  while (missing > 0) {
    pollfd pfd{listener.get(), POLLIN, 0};
    int n = ::poll(&pfd, 1, dl.poll_ms());
    if (n == 0 || dl.expired()) {
      std::string who;
      for (int j = rank + 1; j < size; ++j) {
        if (!peers[j].valid()) who += fmt::format("{}{}", who.empty() ? "" : ", ", j);
      }
      throw TimeoutError(fmt::format(
          "Timed out waiting {}ms for ranks {} to connect to rank {} at {}: they did not start, "
          "crashed before joining, or cannot reach this address",
          dl.budget().count(), who, rank, me));
    }
    int c = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    Fd fd(c);
    set_nodelay(fd.get());
    const int who = greet(fd, rank, size, session, token, dl);
    if (who < 0 || peers[who].valid()) {
      log::warn("rank {}: refused a connection from {} that did not prove it belongs to this job",
                rank, peer_address(fd.get()));
      continue;
    }
    peers[who] = std::move(fd);
    --missing;
  }
  return std::make_unique<TcpTransport>(rank, size, std::move(peers), spin, yield);
}

}  // namespace mci::transport
