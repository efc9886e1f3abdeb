// A minimal HTTP/1.1 GET for the monitor's own clients (mci-top, the
// tests): one request, Connection: close, the whole body read to EOF.
#pragma once

#include <string>

namespace mci {

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET http://HOST:PORT/PATH, with "Authorization: Bearer TOKEN" when a token
// is given. Throws Error when the server cannot be reached (5 s) or answers
// something that is not HTTP.
HttpReply http_get(const std::string& host, int port, const std::string& path, const std::string& token = "");

}  // namespace mci
