// This host's network interfaces, and which address a rank is reached at:
// the interface a user names (NCCL's syntax, which users of gloo and NCCL
// already export), else the route toward the job's store, never a loopback
// address when the job spans hosts.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mci {

struct NetInterface {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.5", "fd00::5"
  bool ipv6 = false;
  bool loopback = false;
};

// Every interface that is up, with its IPv4 and (not link-local) IPv6
// addresses, in the kernel's order.
std::vector<NetInterface> list_interfaces();

// NCCL_SOCKET_IFNAME's syntax: a comma-separated list of name prefixes
// ("eth,ib"); "^" first excludes them instead ("^docker,lo"); "=" (after
// "^" if any) makes them exact names ("=eth1", "^=eth0").
struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
  std::string spec;  // as written, for messages
  bool matches(const std::string& interface) const;
};
// Throws ConfigError for an empty list.
InterfaceFilter parse_interface_filter(const std::string& spec);

// Where this host sends to `host`: the source address the kernel picks for
// it and its interface (nullopt: no route, or `host` does not resolve).
struct Route {
  std::string address;
  std::string interface;
};
std::optional<Route> route_toward(const std::string& host);

bool is_loopback_address(const std::string& ip);

// The interfaces as a person reads them: "eth0 10.0.0.5, lo 127.0.0.1".
std::string interfaces_text(const std::vector<NetInterface>& list);

}  // namespace mci
