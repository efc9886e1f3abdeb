// Slurm hostlist expressions ("node[01-03,7],gpu5") expanded to host names,
// so a launcher started by srun can find the first node of its step.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mci {

// Expands a hostlist in the order Slurm lists it: "node[01-03,7],gpu5" ->
// node01 node02 node03 node7 gpu5. A range keeps the zero padding of its
// lower bound, several bracket groups in one name multiply
// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). Throws ConfigError naming the
// expression on malformed input or when it would expand past max_hosts.
std::vector<std::string> expand_hostlist(std::string_view expr, std::size_t max_hosts = 1u << 20);

// The first host of a hostlist, without expanding the rest; throws
// ConfigError like expand_hostlist, and when the list is empty.
std::string first_host(std::string_view expr);

}  // namespace mci
