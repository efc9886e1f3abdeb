#include "jobview/http_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <system_error>

#include <fmt/format.h>

#include "common/log.hpp"

namespace mci::jobview {

namespace {

constexpr std::size_t kMaxHead = 16 * 1024;
constexpr auto kRequestTime = std::chrono::seconds(2);

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

bool parse_request(const std::string& head, HttpRequest& out) {
  const auto eol = head.find("\r\n");
  if (eol == std::string::npos) return false;
  const std::string line = head.substr(0, eol);
  const auto sp1 = line.find(' ');
  const auto sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return false;
  out.method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (version.rfind("HTTP/1.", 0) != 0 || out.method.empty() || target.empty() || target[0] != '/') return false;
  for (char c : out.method) {
    if (!std::isupper(static_cast<unsigned char>(c))) return false;
  }
  const auto q = target.find('?');
  out.path = url_decode(target.substr(0, q));
  if (q != std::string::npos) {
    std::string rest = target.substr(q + 1);
    std::size_t at = 0;
    while (at <= rest.size()) {
      const auto amp = std::min(rest.find('&', at), rest.size());
      const std::string kv = rest.substr(at, amp - at);
      if (!kv.empty()) {
        const auto eq = kv.find('=');
        out.query[url_decode(kv.substr(0, eq))] = eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1));
      }
      at = amp + 1;
    }
  }
  std::size_t at = eol + 2;
  while (at < head.size()) {
    const auto e = head.find("\r\n", at);
    if (e == std::string::npos || e == at) break;
    const std::string h = head.substr(at, e - at);
    const auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    std::string name = h.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    out.headers[name] = value;
    at = e + 2;
  }
  return true;
}

std::string render_response(const HttpResponse& r) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n{}",
      r.status, reason(r.status), r.content_type, r.body.size(), r.body);
}

HttpServer::HttpServer(const std::string& host, int port, Handler handler)
    : listener_(listen_tcp(host, port, 16)), handler_(std::move(handler)) {
  port_ = local_port(listener_.get());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  thread_ = std::thread([this] { loop(); });
}

HttpServer::~HttpServer() {
  const char b = 1;
  [[maybe_unused]] const auto n = ::write(wake_write_.get(), &b, 1);
  if (thread_.joinable()) thread_.join();
}

void HttpServer::loop() {
  for (;;) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    Fd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) continue;
    try {
      serve(std::move(conn));
    } catch (const std::exception& e) {
      log::debug("mcirun --monitor: a request failed: {}", e.what());
    }
  }
}

void HttpServer::serve(Fd conn) {
  const Deadline dl(std::chrono::steady_clock::now() + kRequestTime, kRequestTime);
  std::string head;
  HttpResponse bad;
  bad.status = 400;
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (head.size() > kMaxHead) {
      bad.status = 413;
      bad.body = "request head too large\n";
      break;
    }
    pollfd p{conn.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(dl.at() - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;  // slow or silent client
    char buf[4096];
    const ssize_t n = ::recv(conn.get(), buf, sizeof(buf), 0);
    if (n <= 0) return;
    head.append(buf, static_cast<std::size_t>(n));
  }
  HttpRequest req;
  std::string out;
  if (bad.status == 400 && parse_request(head, req)) {
    out = render_response(handler_(req));
  } else {
    if (bad.body.empty()) bad.body = "malformed request\n";
    out = render_response(bad);
  }
  send_all(conn.get(), out.data(), out.size(), dl);
}

}  // namespace mci::jobview
