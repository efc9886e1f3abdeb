// The integration tests' main: the tests, or one rank of a scenario when
// started with --scenario=NAME (see scenario.hpp).
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <csignal>
#include <string_view>

#include "scenario.hpp"

int main(int argc, char** argv) {
  constexpr std::string_view flag = "--scenario=";
  if (argc > 1 && std::string_view(argv[1]).starts_with(flag)) {
    // Die with the test that started us: no orphans even if it crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    return mci::test::run_scenario(std::string(std::string_view(argv[1]).substr(flag.size())));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
