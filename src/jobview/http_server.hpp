// The monitor's HTTP server: cpp-httplib's, answering GET (and POST for
// the few actions) through one handler. The page, its JSON and /metrics are
// all it serves, read-only data for a browser, a terminal and Prometheus, so
// its bounds stay those of a small server: one worker thread, one request a
// connection, 2 s to send it, 16 KiB of body at most, header lines of 8 KiB
// (httplib's); whatever a request holds (a bad line, an unknown method or
// path) gets a 4xx with a line of text, never an exception out of the thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

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

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // Listens on host:port (0: the OS picks); throws ConfigError when the
  // address cannot be bound, or when this build has no cpp-httplib.
  HttpServer(const std::string& host, int port, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};  // the serving thread has left
  std::thread thread_;
};

}  // namespace mci::jobview
