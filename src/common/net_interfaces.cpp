#include "common/net_interfaces.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>

#include <fmt/format.h>

#include "common/socket.hpp"
#include "mci/errors.hpp"

namespace mci {

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owned(ifs, ::freeifaddrs);
  for (const ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
      continue;  // fe80::: reachable only with a scope id, which an address in the store does not carry
    }
    out.push_back({i->ifa_name, sockaddr_ip(i->ifa_addr), family == AF_INET6, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  return out;
}

bool InterfaceFilter::matches(const std::string& interface) const {
  bool hit = false;
  for (const auto& n : names) {
    if (exact ? interface == n : interface.rfind(n, 0) == 0) hit = true;
  }
  return exclude ? !hit : hit;
}

InterfaceFilter parse_interface_filter(const std::string& spec) {
  InterfaceFilter f;
  f.spec = spec;
  std::string_view rest = spec;
  if (!rest.empty() && rest.front() == '^') {
    f.exclude = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    f.exact = true;
    rest.remove_prefix(1);
  }
  std::size_t at = 0;
  while (at <= rest.size()) {
    const std::size_t comma = rest.find(',', at);
    const std::string_view name =
        rest.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (!name.empty()) f.names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (f.names.empty()) {
    throw ConfigError(fmt::format(
        "'{}' names no interface: give interface names or prefixes, comma-separated (eth0; eth,ib; ^docker,lo to "
        "exclude; =eth1 for an exact name)",
        spec));
  }
  return f;
}

std::optional<Route> route_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return std::nullopt;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, ::freeaddrinfo);
  // A datagram socket's connect sends nothing: it only asks the kernel's
  // routing table which source address this destination gets.
  Fd s(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid() || ::connect(s.get(), res->ai_addr, res->ai_addrlen) != 0) return std::nullopt;
  const std::string address = local_address(s.get());
  if (address.empty()) return std::nullopt;
  Route r{address, {}};
  for (const auto& i : list_interfaces()) {
    if (i.address == address) r.interface = i.name;
  }
  return r;
}

bool is_loopback_address(const std::string& ip) {
  in_addr v4{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, ip.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

std::string interfaces_text(const std::vector<NetInterface>& list) {
  std::string s;
  for (const auto& i : list) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", i.name, i.address);
  return s.empty() ? "none" : s;
}

}  // namespace mci
