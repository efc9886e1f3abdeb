#include "common/http_get.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "common/socket.hpp"
#include "mci/errors.hpp"

namespace mci {

HttpReply http_get(const std::string& host, int port, const std::string& path, const std::string& token) {
  const Deadline dl(std::chrono::milliseconds(5000));
  Fd s = connect_tcp(host, port, dl, fmt::format("the job's page at {}:{}", host, port));
  std::string req = fmt::format("GET {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n", path, host, port);
  if (!token.empty()) req += fmt::format("Authorization: Bearer {}\r\n", token);
  req += "\r\n";
  if (send_all(s.get(), req.data(), req.size(), dl) != Io::ok)
    throw Error("the connection closed before the request was sent");
  std::string all;
  char buf[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(dl.at() - std::chrono::steady_clock::now()).count();
    pollfd p{s.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      throw TimeoutError(fmt::format("{}:{} did not answer in 5 s", host, port));
    }
    const ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
    if (n > 0) {
      all.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR && errno != EAGAIN) {
      throw Error(fmt::format("reading from {}:{} failed (errno {})", host, port, errno));
    }
  }
  const auto head_end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || all.size() < 12) {
    throw Error(fmt::format("{}:{} did not answer in HTTP: is it the port mcirun --monitor printed?", host, port));
  }
  HttpReply r;
  r.status = std::atoi(all.c_str() + 9);
  r.body = all.substr(head_end + 4);
  return r;
}

}  // namespace mci
