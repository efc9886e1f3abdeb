// Names for the shared-memory segments of tests, unique to a process and a
// call, so that tests running at the same time never open each other's.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace mci::test {

// "/mci-test-WHAT-PID-N".
inline std::string unique_shm_name(std::string_view what) {
  static std::atomic<int> counter{0};
  return fmt::format("/mci-test-{}-{}-{}", what, ::getpid(), counter++);
}

}  // namespace mci::test
