// What a scenario's rank uses: join the job the test started, print a line.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "mci/mci.hpp"

namespace mci::test {

// Joins with env:// (MCI_TEST_BACKEND, MCI_TEST_TIMEOUT_MS; MCI_TEST_HOSTS
// gives each rank a pretend host).
std::shared_ptr<ProcessGroup> join();
// One line on stdout in one write (ranks' lines never interleave).
void say(const std::string& s);
// An integer from the environment, or `dflt`.
long long env_ll(const char* name, long long dflt);

// Runs f(); if it throws, says "<label> <milliseconds it ran>" (how long
// the rank waited before it failed, which the tests bound) and rethrows.
template <class F>
void say_ms_if_it_fails(const char* label, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    f();
  } catch (...) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    say(std::string(label) + " " + std::to_string(ms.count()));
    throw;
  }
}

}  // namespace mci::test
