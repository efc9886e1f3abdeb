#include "launch/config/devices.hpp"

#include <sched.h>

#include <filesystem>
#include <system_error>

#include "common/env.hpp"

namespace mci::launch {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

namespace {

// CUDA accepts indices and GPU-/MIG- UUIDs; it stops at the first entry it
// cannot read, so "0,1,-1,2" shows two devices.
bool valid_cuda_device(const std::string& entry) {
  if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) return true;
  auto n = parse_int(entry);
  return n && *n >= 0;
}

}  // namespace

int visible_gpus(const EnvLookup& env, const std::string& dev_dir) {
  if (auto list = env("CUDA_VISIBLE_DEVICES")) {
    int n = 0;
    std::size_t start = 0;
    while (start < list->size()) {
      std::size_t comma = list->find(',', start);
      if (comma == std::string::npos) comma = list->size();
      if (!valid_cuda_device(list->substr(start, comma - start))) break;
      ++n;
      start = comma + 1;
    }
    return n;
  }
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++n;
    }
  }
  return n;
}

}  // namespace mci::launch
