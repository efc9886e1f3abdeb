// One thread per rank over the in-process loopback transport: the ranks share
// one hub and each thread holds its own LoopbackTransport.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/loopback_transport.hpp"
#include "support/thread_ranks.hpp"

namespace mci::test {

// Runs body(transport) on n threads sharing one hub; returns each rank's
// exception text ("" if none). window_bytes: the hub's bytes in flight per
// direction (0: unbounded, a send completes at once).
inline std::vector<std::string> run_loopback(int n, const std::function<void(transport::LoopbackTransport&)>& body,
                                             std::size_t window_bytes = 0) {
  auto hub = std::make_shared<transport::LoopbackHub>(n, window_bytes);
  return run_threads(n, [&](int r) {
    transport::LoopbackTransport t(hub, r);
    body(t);
  });
}

// As run_loopback, and expects no rank to throw.
inline void with_loopback(int n, const std::function<void(transport::LoopbackTransport&)>& body) {
  const std::vector<std::string> errors = run_loopback(n, body);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

}  // namespace mci::test
