// Multi-process scenarios: what one rank of a test job runs. A scenario is
// defined beside the test that checks it:
//
//   MCI_SCENARIO(timeout) { auto pg = join(); ...; return exit_code::failed; }
//   TEST(Timeout, ...) { Job job(2, Scenario{"timeout"}); ... exit_code::timeout ... }
//
// The integration test program is also the rank program: started with
// --scenario=NAME (by Job, or by mcirun through scenario_command()), it runs
// that scenario instead of the tests (support/scenario_main.cpp) and turns
// mci's exceptions into the exit codes below.
#pragma once

#include <string>
#include <vector>

namespace mci::test {

namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int failed = 1;  // the scenario's own check failed
inline constexpr int unknown_scenario = 2;
inline constexpr int buffer_changed = 3;  // a failed call modified a user buffer
inline constexpr int timeout = 10;        // TimeoutError
inline constexpr int peer = 11;           // PeerError
inline constexpr int mismatch = 12;       // MismatchError
inline constexpr int config = 13;         // ConfigError
inline constexpr int other_error = 14;    // any other mci::Error
}  // namespace exit_code

using ScenarioBody = int (*)();
// Called at static initialisation by MCI_SCENARIO; returns true.
bool add_scenario(const char* name, ScenarioBody body);
// Runs a scenario as a rank: its exit code (exceptions mapped as above).
int run_scenario(const std::string& name);

// This program, as a path another process can start.
std::string self_program();
// argv of a rank that runs `name`.
std::vector<std::string> scenario_command(const std::string& name);

struct Scenario {
  std::string name;
};

}  // namespace mci::test

#define MCI_SCENARIO(name)                                       \
  static int mci_scenario_##name();                              \
  [[maybe_unused]] static const bool mci_scenario_added_##name = \
      ::mci::test::add_scenario(#name, &mci_scenario_##name);    \
  static int mci_scenario_##name()
