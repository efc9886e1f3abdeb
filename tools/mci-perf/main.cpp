// mci-perf: nccl-tests-style sweeps of mci's collectives. The logic lives in
// src/perf/ where the tests reach it; -g/-t start their ranks through
// mcirun's launcher (src/launch), which only a tool may link beside a group.
#include <unistd.h>

#include <array>
#include <iostream>

#include "launch/launcher.hpp"
#include "perf/app.hpp"

namespace {

int start_ranks(int ranks, std::vector<std::string> argv) {
  // The ranks run this very program, wherever argv[0] pointed.
  std::array<char, 4096> self{};
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n > 0) argv.at(0) = std::string(self.data(), static_cast<std::size_t>(n));
  return mci::launch::run_local_job(ranks, argv);
}

}  // namespace

int main(int argc, char** argv) { return mci::perf::perf_main({argv, argv + argc}, std::cout, std::cerr, start_ranks); }
