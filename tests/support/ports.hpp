#pragma once

#include "common/socket.hpp"

namespace mci::test {

// A port the OS says is free right now (bound to port 0, then released).
inline int free_port() {
  Fd l = listen_tcp("127.0.0.1", 0);
  return local_port(l.get());
}

}  // namespace mci::test
