#include "transport/shm/shm_connect.hpp"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"

namespace mci::transport {

std::string host_identity() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  return host_name() + "/" + boot;
}

std::unique_ptr<ShmWorld> connect_shm(Store& store, int rank, int size, ShmMode mode,
                                      std::size_t buffer_bytes, const Deadline& dl, std::string& why) {
  if (mode == ShmMode::off) {
    why = "MCI_TRANSPORT=tcp";
    return nullptr;
  }
  if (size < 2) {
    why = "a group of one rank";
    return nullptr;
  }
  const auto wait = std::chrono::milliseconds(std::max(dl.poll_ms(), 1));
  const std::string me = host_identity();
  store.set(fmt::format("shm/host/{}", rank), to_bytes(me));
  std::string others;
  for (int r = 0; r < size; ++r) {
    if (to_string(store.get(fmt::format("shm/host/{}", r), wait)) != me) {
      others += fmt::format("{}{}", others.empty() ? "" : ", ", r);
    }
  }
  if (!others.empty()) {
    why = fmt::format("ranks {} are on other hosts than rank {}", others, rank);
    if (mode == ShmMode::required) {
      throw ConfigError(fmt::format("MCI_TRANSPORT=shm needs every rank on one host, but {}; use "
                                    "MCI_TRANSPORT=auto or tcp",
                                    why));
    }
    return nullptr;
  }

  // Rank 0 creates the segment; everyone maps it and says whether it could;
  // once all have answered, the name is removed.
  std::unique_ptr<ShmWorld> world;
  std::string mine = "ok";
  try {
    if (rank == 0) {
      const auto nonce = auth::random_nonce();
      const std::string name = fmt::format("/mci-{}-{:02x}{:02x}{:02x}{:02x}", ::getpid(), nonce[0], nonce[1],
                                           nonce[2], nonce[3]);
      world = std::make_unique<ShmWorld>(ShmSegment::create(name, size, buffer_bytes), rank, size);
      store.set("shm/name", to_bytes(name));
    } else {
      const std::string name = to_string(store.get("shm/name", wait));
      world = std::make_unique<ShmWorld>(ShmSegment::open(name, size, buffer_bytes), rank, size);
    }
  } catch (const Error& e) {
    mine = std::string("error: ") + e.what();
    if (rank == 0) store.set("shm/name", to_bytes("/nonexistent"));
  }
  store.set(fmt::format("shm/mapped/{}", rank), to_bytes(mine));
  std::string failed;
  for (int r = 0; r < size; ++r) {
    const std::string v = to_string(store.get(fmt::format("shm/mapped/{}", r), wait));
    if (v != "ok") failed += fmt::format("{}rank {}: {}", failed.empty() ? "" : "; ", r, v.substr(7));
  }
  if (world) world->unlink_name();
  if (!failed.empty()) {
    why = "shared memory could not be set up (" + failed + ")";
    if (mode == ShmMode::required) throw ConfigError("MCI_TRANSPORT=shm: " + why);
    log::warn("{}; using TCP", why);
    return nullptr;
  }
  return world;
}

}  // namespace mci::transport
