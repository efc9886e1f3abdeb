// What a scenario's rank uses: join the job the test started, print a line.
#pragma once

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

}  // namespace mci::test
