// mci-perf from the command line to the exit status: parse, join the job,
// sweep, report. tools/mci-perf/main.cpp is one call to perf_main.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mci::perf {

// Exit status: 0 success; 1 a collective failed or, with -c, an element was
// wrong; 2 a usage error (bad flag, root out of range, unwritable output).
// Only rank 0 writes to `out`; every rank reports its own failures on `err`.
int perf_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace mci::perf
