#include "common/cpus.hpp"

#include <sched.h>
#include <unistd.h>

#include <bitset>

namespace mci {

namespace {
using Mask = std::bitset<CPU_SETSIZE>;

Mask own_mask() {
  Mask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) m.set(static_cast<std::size_t>(c));
    }
    return m;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < n && c < CPU_SETSIZE; ++c) m.set(static_cast<std::size_t>(c));
  return m;
}
}  // namespace

int online_cpus() {
  const auto n = static_cast<int>(own_mask().count());
  return n > 0 ? n : 1;
}

std::vector<int> affinity_cpus() {
  const Mask m = own_mask();
  std::vector<int> cpus;
  for (std::size_t c = 0; c < m.size(); ++c) {
    if (m.test(c)) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

std::string affinity_mask_text() { return own_mask().to_string(); }

int cpus_in_union(const std::vector<std::string>& masks) {
  Mask all;
  for (const auto& m : masks) {
    if (m.size() != CPU_SETSIZE || m.find_first_not_of("01") != std::string::npos) continue;
    all |= Mask(m);
  }
  return static_cast<int>(all.count());
}

}  // namespace mci
