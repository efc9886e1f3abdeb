#include "common/shm_names.hpp"

#include <sys/mman.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace mci {

std::string shm_segment_name(pid_t creator, const std::array<std::uint8_t, 4>& nonce) {
  return fmt::format("/mci-{}-{:02x}{:02x}{:02x}{:02x}", creator, nonce[0], nonce[1], nonce[2], nonce[3]);
}

int remove_shm_segments_of(pid_t creator) {
  const std::string prefix = fmt::format("mci-{}-", creator);
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(prefix) && ::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace mci
