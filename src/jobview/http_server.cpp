#include "jobview/http_server.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include <fmt/format.h>

#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"

#ifdef MCI_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace mci::jobview {

#ifdef MCI_HAVE_HTTPLIB

namespace {

constexpr auto kRequestTime = std::chrono::seconds(2);
constexpr std::size_t kMaxBody = 16 * 1024;

HttpRequest request_of(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.params) r.query[k] = v;
  for (const auto& [k, v] : req.headers) {
    std::string name = k;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    r.headers[name] = v;
  }
  return r;
}

void answer(const HttpResponse& out, httplib::Response& res) {
  res.status = out.status;
  res.set_content(out.body, out.content_type.c_str());
  // Live data, and never to be read as another type than it says.
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
}

}  // namespace

HttpServer::HttpServer(const std::string& host, int port, Handler handler)
    : server_(std::make_unique<httplib::Server>()) {
  if (port < 0 || port > 65535) {
    throw ConfigError(fmt::format("port {} is out of range: use 0 (any free port) or 1-65535", port));
  }
  httplib::Server& s = *server_;
  // One worker, as the data is small and a request takes microseconds: a
  // slow client holds it at most kRequestTime. httplib takes ownership of
  // the queue it is given (and deletes it), hence release().
  s.new_task_queue = [] { return std::make_unique<httplib::ThreadPool>(1).release(); };
  s.set_read_timeout(kRequestTime);
  s.set_write_timeout(kRequestTime);
  s.set_keep_alive_max_count(1);
  s.set_payload_max_length(kMaxBody);
  // Every request is answered from its head, before httplib would read a
  // body: the monitor takes none (the one action is a POST with a header),
  // and `curl -X POST` sends no Content-Length, which httplib's POST route
  // refuses. What httplib lets through but no browser sends (a target that
  // is not a path, another protocol than HTTP/1.x) is refused here too.
  s.set_pre_routing_handler([h = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    if (req.path.empty() || req.path[0] != '/' || req.version.rfind("HTTP/1.", 0) != 0) {
      answer(HttpResponse{400, "text/plain; charset=utf-8", "malformed request\n"}, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    try {
      answer(h(request_of(req)), res);
    } catch (const std::exception& e) {
      log::debug("mcirun --monitor: a request failed: {}", e.what());
      answer(HttpResponse{500, "text/plain; charset=utf-8", "the monitor could not answer this request\n"}, res);
    }
    return httplib::Server::HandlerResponse::Handled;
  });
  // What httplib refuses itself (a malformed request, a body too large)
  // still says why, in a line of text.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const char* why = res.status == 413 ? "request too large\n" : "malformed request\n";
    answer(HttpResponse{res.status, "text/plain; charset=utf-8", why}, res);
  });
  port_ = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    // httplib does not say why; listening ourselves does (in use, an
    // address that does not resolve or is not this host's).
    listen_tcp(host, port, 1);
    throw ConfigError(fmt::format("cannot listen on {}:{} for the monitor's page", host, port));
  }
  // The server's threads take no signal (they inherit this mask): httplib
  // stops serving for good when accept() fails with anything but EMFILE,
  // and a signal meant for mcirun (SIGCHLD at every rank's exit) landing on
  // its thread was such a failure (EINTR).
  sigset_t all, was;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &was);
  thread_ = std::thread([this, host] {
    // httplib returns from its loop when accept() fails (ECONNABORTED, a
    // client gone before it was accepted, among others), closing the
    // socket: listen again on the same port, unless we are stopping.
    while (server_->listen_after_bind(), !stopping_) {
      log::debug("mcirun --monitor: the page's server stopped accepting; listening again on port {}", port_);
      if (!server_->bind_to_port(host, port_)) {
        log::warn("mcirun --monitor: port {} could not be bound again: the page is no longer served", port_);
        break;
      }
    }
    done_ = true;
  });
  ::pthread_sigmask(SIG_SETMASK, &was, nullptr);
}

HttpServer::~HttpServer() {
  stopping_ = true;
  // Until the thread has left: a stop() that came while it was binding
  // again (no loop running yet) does nothing, so it is asked again.
  while (!done_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (thread_.joinable()) thread_.join();
}

#else  // no cpp-httplib in this build

}  // namespace mci::jobview

namespace httplib {
class Server {};  // complete, so that HttpServer's member can be destroyed
}  // namespace httplib

namespace mci::jobview {

HttpServer::HttpServer(const std::string& host, int port, Handler) {
  throw ConfigError(
      fmt::format("mcirun --monitor={}:{}: this build of mci has no cpp-httplib, which serves the page: install it "
                  "(apt-get install libcpp-httplib-dev pkg-config) and build again",
                  host, port));
}

HttpServer::~HttpServer() = default;

#endif

}  // namespace mci::jobview
