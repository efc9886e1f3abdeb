// The monitor's HTTP server: GET (and POST for the few actions) over
// HTTP/1.1 with one request per connection, answered by a handler, on a
// thread of its own. Small on purpose: the page, its JSON and /metrics are
// all it serves, read-only data for a browser, a terminal and Prometheus.
// A request is bounded (16 KiB of head, 2 s to send it) and whatever it
// holds (a bad line, an unknown method or path) gets a 4xx, never an
// exception out of the thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "common/socket.hpp"

namespace mci::jobview {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // names in lower case
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Parses a request head ("GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n");
// false when it is not a well-formed request.
bool parse_request(const std::string& head, HttpRequest& out);
// The bytes on the wire for a response (with Content-Length, no caching).
std::string render_response(const HttpResponse& r);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // Listens on host:port (0: the OS picks); throws ConfigError when the
  // address cannot be bound.
  HttpServer(const std::string& host, int port, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const { return port_; }

 private:
  void loop();
  void serve(Fd conn);
  Fd listener_;
  Fd wake_read_, wake_write_;
  int port_ = 0;
  Handler handler_;
  std::thread thread_;
};

}  // namespace mci::jobview
