#include "common/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

void Fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

struct AddrInfo {
  addrinfo* res = nullptr;
  ~AddrInfo() {
    if (res) freeaddrinfo(res);
  }
};

int resolve(const std::string& host, int port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  return getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.res);
}

}  // namespace

std::string sockaddr_ip(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

namespace {

// Every address of this host: IPv6's wildcard taking IPv4 too (dual stack),
// else IPv4's (a host without IPv6).
Fd listen_any(int port, int backlog) {
  Fd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.valid()) {
    int one = 1, zero = 0;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    any.sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) == 0 &&
        ::listen(fd.get(), backlog) == 0) {
      return fd;
    }
    if (errno == EADDRINUSE) {
      throw ConfigError(fmt::format(
          "port {} is already in use: pick a free port (e.g. --master_port / MASTER_PORT) or stop the process that "
          "holds it",
          port));
    }
  }
  return {};
}

}  // namespace

Fd listen_tcp(const std::string& host, int port, int backlog) {
  if (port < 0 || port > 65535) {
    throw ConfigError(fmt::format("port {} is out of range: use 0 (any free port) or 1-65535", port));
  }
  if (host.empty()) {
    if (Fd fd = listen_any(port, backlog); fd.valid()) return fd;
  }
  AddrInfo ai;
  if (int rc = resolve(host, port, true, ai); rc != 0) {
    throw ConfigError(fmt::format("cannot resolve address '{}' to listen on: {}", host, gai_strerror(rc)));
  }
  int last_errno = 0;
  for (addrinfo* p = ai.res; p; p = p->ai_next) {
    Fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!fd.valid()) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), p->ai_addr, p->ai_addrlen) != 0) {
      last_errno = errno;
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last_errno = errno;
      continue;
    }
    return fd;
  }
  if (last_errno == EADDRINUSE) {
    throw ConfigError(
        fmt::format("port {} on {} is already in use: pick a free port (e.g. --master_port / MASTER_PORT) "
                    "or stop the process that holds it",
                    port, host));
  }
  throw ConfigError(fmt::format("cannot listen on {}:{}: {}", host, port, std::strerror(last_errno)));
}

Fd connect_start(const std::string& host, int port, std::string& error) {
  AddrInfo ai;
  if (int rc = resolve(host, port, false, ai); rc != 0) {
    error = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
    return Fd();
  }
  for (addrinfo* p = ai.res; p; p = p->ai_next) {
    Fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, p->ai_protocol));
    if (!fd.valid()) {
      error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), p->ai_addr, p->ai_addrlen) == 0 || errno == EINPROGRESS) return fd;
    error = std::strerror(errno);
  }
  return Fd();
}

Fd connect_tcp(const std::string& host, int port, const Deadline& dl, const std::string& what) {
  std::string last_error = "no attempt made";
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    AddrInfo ai;
    int rc = resolve(host, port, false, ai);
    if (rc != 0) {
      last_error = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
      if (rc != EAI_AGAIN) {
        throw ConfigError(fmt::format("cannot reach {} at {}:{}: {}", what, host, port, last_error));
      }
    }
    for (addrinfo* p = rc == 0 ? ai.res : nullptr; p; p = p->ai_next) {
      Fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, p->ai_protocol));
      if (!fd.valid()) continue;
      int r = ::connect(fd.get(), p->ai_addr, p->ai_addrlen);
      if (r != 0 && errno == EINPROGRESS) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        int pr = ::poll(&pfd, 1, std::min(dl.poll_ms(), 1000));
        if (pr == 1) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          r = err == 0 ? 0 : -1;
          errno = err;
        } else {
          errno = ETIMEDOUT;
          r = -1;
        }
      }
      if (r == 0 && connected_to_itself(fd.get())) {
        r = -1;
        errno = ECONNREFUSED;
      }
      if (r == 0) {
        set_nodelay(fd.get());
        return fd;
      }
      last_error = std::strerror(errno);
    }
    if (dl.expired()) break;
    std::this_thread::sleep_for(std::min(backoff, dl.wait_left()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
  throw TimeoutError(
      fmt::format("Timed out waiting {}ms to connect to {} at {}:{} (last error: {}). Check the address and "
                  "port, and that the process serving it is running.",
                  dl.budget().count(), what, host, port, last_error));
}

int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
  return -1;
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return sockaddr_ip(reinterpret_cast<const sockaddr*>(&ss));
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return sockaddr_ip(reinterpret_cast<const sockaddr*>(&ss));
}

bool connected_to_itself(int fd) {
  sockaddr_storage me{}, peer{};
  socklen_t me_len = sizeof me, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &me_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || me.ss_family != peer.ss_family) {
    return false;
  }
  if (me.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(me);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  if (me.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(me);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    return a.sin6_port == b.sin6_port && std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr) == 0;
  }
  return false;
}

void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_keepalive(int fd) {
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

Io send_all(int fd, const void* data, std::size_t n, const Deadline& dl) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      int pr = ::poll(&pfd, 1, dl.poll_ms());
      if (pr == 0) return Io::timeout;
      if (pr < 0 && errno != EINTR) return Io::error;
      continue;
    }
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) return Io::closed;
    return Io::error;
  }
  return Io::ok;
}

Io recv_all(int fd, void* data, std::size_t n, const Deadline& dl) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd, POLLIN, 0};
      int pr = ::poll(&pfd, 1, dl.poll_ms());
      if (pr == 0) return Io::timeout;
      if (pr < 0 && errno != EINTR) return Io::error;
      continue;
    }
    if (errno == ECONNRESET) return Io::closed;
    return Io::error;
  }
  return Io::ok;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

namespace {
std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  return boot;
}
}  // namespace

std::string machine_identity() { return host_name() + "/" + boot_id(); }

std::string kernel_identity() {
  const std::string boot = boot_id();
  return boot.empty() ? machine_identity() : "boot:" + boot;
}

bool port_free(const std::string& host, int port) {
  try {
    Fd fd = listen_tcp(host, port, 1);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

}  // namespace mci
