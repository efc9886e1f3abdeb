#include "transport/shm/shm_connect.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/cpus.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"

namespace mci::transport {

std::string host_identity() {
  if (const char* id = std::getenv("MCI_HOST_ID"); id && *id) return std::string("id:") + id;
  return machine_identity();
}

namespace {

// Maps a segment for `members` (ranks of one host, ascending): the first
// creates it, the others open it. Returns the error text instead of throwing,
// so that every rank can still publish its verdict.
std::unique_ptr<ShmWorld> map_segment(Store& store, int rank, const std::vector<int>& members,
                                      std::size_t buffer_bytes, std::chrono::milliseconds wait, std::string& error) {
  const int me = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const int n = static_cast<int>(members.size());
  const std::string key = fmt::format("shm/name/{}", members.front());
  try {
    if (me == 0) {
      const auto nonce = auth::random_nonce();
      const std::string name = fmt::format("/mci-{}-{:02x}{:02x}{:02x}{:02x}", ::getpid(), nonce[0], nonce[1],
                                           nonce[2], nonce[3]);
      auto world = std::make_unique<ShmWorld>(ShmSegment::create(name, n, buffer_bytes), me, n, members);
      store.set(key, to_bytes(name));
      return world;
    }
    const std::string name = to_string(store.get(key, wait));
    return std::make_unique<ShmWorld>(ShmSegment::open(name, n, buffer_bytes), me, n, members);
  } catch (const Error& e) {
    error = e.what();
    if (me == 0) store.set(key, to_bytes("/nonexistent"));
    return nullptr;
  }
}

}  // namespace

ShmSetup connect_shm(Store& store, int rank, int size, ShmMode mode, std::size_t buffer_bytes, const Deadline& dl) {
  ShmSetup out;
  if (size < 2) {
    out.why = "a group of one rank";
    return out;
  }
  const auto wait = std::chrono::milliseconds(std::max(dl.poll_ms(), 1));
  const std::string me = host_identity();
  const std::string machine = machine_identity();
  store.set(fmt::format("shm/host/{}", rank), to_bytes(me));
  store.set(fmt::format("shm/machine/{}", rank), to_bytes(machine));
  store.set(fmt::format("shm/cpus/{}", rank), to_bytes(affinity_mask_text()));
  // Hosts in order of their lowest rank; every rank computes the same.
  std::vector<std::string> host_of(static_cast<std::size_t>(size));
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    host_of[r] = to_string(store.get(fmt::format("shm/host/{}", r), wait));
    if (std::find(hosts.begin(), hosts.end(), host_of[r]) == hosts.end()) hosts.push_back(host_of[r]);
  }
  std::vector<std::string> masks;
  for (int r = 0; r < size; ++r) {
    if (host_of[r] == me) out.members.push_back(r);
    if (to_string(store.get(fmt::format("shm/machine/{}", r), wait)) == machine) {
      ++out.machine_ranks;
      masks.push_back(to_string(store.get(fmt::format("shm/cpus/{}", r), wait)));
    }
  }
  out.machine_cpus = std::max(cpus_in_union(masks), 1);
  out.one_host = hosts.size() == 1;
  if (mode == ShmMode::off) {
    // members still says how many ranks share this host (for wait policies).
    out.one_host = false;
    out.why = "MCI_TRANSPORT=tcp";
    return out;
  }
  if (!out.one_host) {
    std::string others;
    for (int r = 0; r < size; ++r) {
      if (host_of[r] != me) others += fmt::format("{}{}", others.empty() ? "" : ", ", r);
    }
    out.why = fmt::format("ranks {} are on other hosts than rank {}", others, rank);
    if (mode == ShmMode::required) {
      throw ConfigError(fmt::format("MCI_TRANSPORT=shm needs every rank on one host, but {}; use "
                                    "MCI_TRANSPORT=auto or tcp",
                                    out.why));
    }
    if (hosts.size() == static_cast<std::size_t>(size)) {
      out.why += " (one rank per host: nothing to share)";
      out.members.clear();
      return out;
    }
  }

  // Each host's first rank creates its segment; everyone maps its own host's
  // and says whether it could; once all have answered (on every host, so
  // that all ranks agree on the layout), the names are removed.
  std::string error;
  if (out.members.size() >= 2) out.world = map_segment(store, rank, out.members, buffer_bytes, wait, error);
  store.set(fmt::format("shm/mapped/{}", rank), to_bytes(error.empty() ? "ok" : "error: " + error));
  std::string failed;
  for (int r = 0; r < size; ++r) {
    const std::string v = to_string(store.get(fmt::format("shm/mapped/{}", r), wait));
    if (v != "ok") failed += fmt::format("{}rank {}: {}", failed.empty() ? "" : "; ", r, v.substr(7));
  }
  if (out.world) {
    out.world->unlink_name();
    out.world->set_oversubscribed(out.machine_ranks > out.machine_cpus);
  }
  if (!failed.empty()) {
    out.why = "shared memory could not be set up (" + failed + ")";
    if (mode == ShmMode::required) throw ConfigError("MCI_TRANSPORT=shm: " + out.why);
    log::warn("{}; using TCP", out.why);
    out.world.reset();
    out.members.clear();
    out.one_host = false;
    return out;
  }
  if (!out.one_host) {
    for (const auto& h : hosts) {
      for (int r = 0; r < size; ++r) {
        if (host_of[r] == h) {
          out.leaders.push_back(r);
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace mci::transport
