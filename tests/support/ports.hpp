#pragma once

#include <fstream>
#include <random>

#include "common/socket.hpp"

namespace mci::test {

// A port that is free right now and unlikely to be taken before the test
// binds it. Ports the OS hands out for bind(0) come from the ephemeral
// range, which every outgoing connection of the suite also draws its local
// port from: a port released there can be taken by a client socket (or
// handed to a test running beside this one) before our server binds it.
// So pick at random below the ephemeral range and check it binds.
inline int free_port() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low;
  constexpr int kSpan = 10000;
  if (low > kSpan + 1024) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> pick(low - kSpan, low - 1);
    for (int tries = 0; tries < 200; ++tries) {
      const int port = pick(gen);
      try {
        Fd l = listen_tcp("127.0.0.1", port);
        return local_port(l.get());
      } catch (const std::exception&) {
        // taken: try another
      }
    }
  }
  Fd l = listen_tcp("127.0.0.1", 0);
  return local_port(l.get());
}

}  // namespace mci::test
