// mci-perf from the command line to the exit status: parse, join the job,
// sweep, report. tools/mci-perf/main.cpp is one call to perf_main.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace mci::perf {

// Starts `ranks` processes running `argv` (argv[0] is the program) as one
// job, with the launcher's store, output relay and teardown, and returns the
// launcher's exit status. mci-perf's main passes mcirun's launcher: the
// engine joins a group, so it cannot link the launcher itself (DESIGN.md).
using StartRanks = std::function<int(int ranks, const std::vector<std::string>& argv)>;

// Set in the environment of the ranks mci-perf starts itself (-g/-t), so
// each knows it is one of them and not a process asking for more.
inline constexpr const char* kStartedRanksVar = "MCI_PERF_STARTED_RANKS";

// Exit status: 0 success; 1 a collective failed or, with -c, an element was
// wrong; 2 a usage error (bad flag, root out of range, unwritable output).
// Only rank 0 writes to `out`; every rank reports its own failures on `err`.
// With -g/-t above 1 and no launcher around, `start` starts the ranks; an
// empty `start` refuses such a command line.
int perf_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err, const StartRanks& start = {});

}  // namespace mci::perf
