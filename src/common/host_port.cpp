#include "common/host_port.hpp"

#include <charconv>

#include <fmt/format.h>

namespace mci {

std::string HostPort::text() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

std::optional<HostPort> split_host_port(std::string_view text, std::string& why) {
  HostPort out;
  std::string_view port;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) {
      why = "missing ']' after the IPv6 address";
      return std::nullopt;
    }
    out.host = std::string(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      why = "expected ':PORT' after ']'";
      return std::nullopt;
    }
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      why = "write an IPv6 address in brackets, e.g. [::1]:29400";
      return std::nullopt;
    }
    out.host = std::string(text.substr(0, colon));
    has_port = true;
    port = text.substr(colon + 1);
  } else {
    out.host = std::string(text);
  }
  if (out.host.empty()) {
    why = "no host; use HOST:PORT, e.g. node01:29400";
    return std::nullopt;
  }
  if (has_port) {
    // "host:" is a typo, not a request for a default port.
    int p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      why = fmt::format("'{}' is not a TCP port: use a number from 1 to 65535", port);
      return std::nullopt;
    }
    out.port = p;
  }
  return out;
}

}  // namespace mci
