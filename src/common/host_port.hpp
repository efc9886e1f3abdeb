// "HOST:PORT" as a user or a peer writes it, split in one place the same way
// for every part that reads one (etcd endpoints, --rdzv_endpoint, a relay's
// published address): an IPv6 host goes in brackets, "[::1]:2379".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mci {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;      // 0: the text gave none
  // HOST:PORT again, brackets around an IPv6 host (what a peer parses back).
  std::string text() const;
};

// The host and port of "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT". nullopt
// when the text is not one of those, `why` then saying what is wrong in words
// a caller puts after the text it quotes.
std::optional<HostPort> split_host_port(std::string_view text, std::string& why);

}  // namespace mci
