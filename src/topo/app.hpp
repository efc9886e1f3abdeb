// mci-topo from the command line to the exit status. tools/mci-topo/main.cpp
// is one call to topo_main.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mci::topo {

// Exit status: 0 success; 2 a usage error or an input mci-topo cannot read
// (the message says which and what to do).
int topo_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace mci::topo
