// Thin RAII and deadline-aware helpers over POSIX TCP sockets.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "common/deadline.hpp"

struct sockaddr;

namespace mci {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// Binds and listens; port 0 lets the OS choose; host "" is every address of
// this host (IPv4 and IPv6). A port in use throws ConfigError naming the
// address and what to do.
Fd listen_tcp(const std::string& host, int port, int backlog = 128);
// Connects, retrying refused/unreachable attempts until the deadline (the
// server may not be up yet). Throws TimeoutError naming `what`.
Fd connect_tcp(const std::string& host, int port, const Deadline& dl, const std::string& what);
// Starts one non-blocking connect (no retry): the socket, connected or with
// the connect in progress (poll it for POLLOUT, then read SO_ERROR), or an
// invalid Fd with the reason in `error`.
Fd connect_start(const std::string& host, int port, std::string& error);

int local_port(int fd);
std::string local_address(int fd);
// The numeric address of an IPv4 or IPv6 socket address ("10.0.0.5",
// "fd00::5"); "" for another family.
std::string sockaddr_ip(const sockaddr* sa);
std::string peer_address(int fd);
// True when a connected socket's two ends are the same address and port: a
// dial to a port nobody listens on any more (a peer that just exited) can
// be given that very port as its own source, and TCP's simultaneous open
// then connects the socket to itself. Such a connection must count as
// refused, or the dialler waits forever for an answer from itself.
bool connected_to_itself(int fd);

void set_nonblocking(int fd);
void set_nodelay(int fd);
void set_keepalive(int fd);

enum class Io { ok, timeout, closed, error };
// Blocking-style transfers on a (possibly non-blocking) socket, bounded by a
// deadline. On Io::error, errno holds the cause.
Io send_all(int fd, const void* data, std::size_t n, const Deadline& dl);
Io recv_all(int fd, void* data, std::size_t n, const Deadline& dl);

// The host's name, for messages and same-host detection.
std::string host_name();
// This machine, uniquely: hostname and boot id (containers may share a
// hostname; they do not share a boot).
std::string machine_identity();
// The running kernel (its boot id): processes that share CPUs, whatever
// their host names. Containers and network-namespace "hosts" on one machine
// have names of their own but one kernel and one set of cores.
std::string kernel_identity();
// True if port is free to bind on host now (for launchers checking early).
bool port_free(const std::string& host, int port);

}  // namespace mci
