#include "transport/shm/shm_connect.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/cpus.hpp"
#include "common/log.hpp"
#include "common/shm_names.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"

namespace mci::transport {

namespace {

// What the segment is made with, from the group's settings.
struct ShmOptions {
  std::size_t buffer_bytes;
  ShmWait wait;
  bool single_copy;  // MCI_SHM_SINGLE_COPY allows it
};

std::string host_identity(const std::string& host_id) { return host_id.empty() ? machine_identity() : "id:" + host_id; }

// Maps a segment for `members` (ranks of one host, ascending): the first
// creates it, the others open it. Returns the error text instead of throwing,
// so that every rank can still publish its verdict.
std::unique_ptr<ShmWorld> map_segment(Store& store, int rank, const std::vector<int>& members, const ShmOptions& o,
                                      std::chrono::milliseconds wait, std::string& error) {
  const int me = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const int n = static_cast<int>(members.size());
  const std::string prefix = "shm/name";
  const std::string key = fmt::format("{}/{}", prefix, members.front());
  try {
    if (me == 0) {
      const auto nonce = auth::random_nonce();
      const std::string name = shm_segment_name(::getpid(), {nonce[0], nonce[1], nonce[2], nonce[3]});
      auto world = std::make_unique<ShmWorld>(ShmSegment::create(name, n, o.buffer_bytes), me, n, members, o.wait,
                                              o.single_copy);
      store.set(key, to_bytes(name));
      return world;
    }
    // Stopped by the group's first failure or death (the creator's death
    // certificate included): waiting on would hold every rank of the host
    // for the whole timeout.
    const auto named = store.get_range(prefix, members.front(), 1, "shm/mapped/failed", wait);
    if (!named[0]) {
      throw PeerError(fmt::format("rank {} stopped waiting for rank {}'s shared-memory segment: a rank of the group "
                                  "failed or its process ended first",
                                  rank, members.front()),
                      members.front());
    }
    const std::string name = to_string(*named[0]);
    return std::make_unique<ShmWorld>(ShmSegment::open(name, n, o.buffer_bytes), me, n, members, o.wait, o.single_copy);
  } catch (const Error& e) {
    error = e.what();
    if (me == 0) store.set(key, to_bytes("/nonexistent"));
    return nullptr;
  }
}

}  // namespace

ShmSetup connect_shm(Store& store, int rank, int size, ShmMode mode, const Settings& settings, const Deadline& dl) {
  ShmSetup out;
  if (size < 2) {
    out.why = "a group of one rank";
    return out;
  }
  const auto wait = dl.wait_left();
  const std::string me = host_identity(settings.text("MCI_HOST_ID"));
  // Who shares this machine's cores: by kernel, not by host name, so ranks
  // of containers or namespace "hosts" on one machine count together (they
  // spun as if each host had the cores to itself: 4 ranks of 2 namespace
  // hosts on 2 cores, 8 B all-reduce 137 us instead of yielding).
  const std::string machine = kernel_identity();
  // One value per rank: host, machine and CPU mask, one per line (none of
  // them holds a newline).
  const RankVerdicts where =
      exchange_verdicts(store, "shm/where", rank, size,
                        Verdict::value(fmt::format("{}\n{}\n{}", me, machine, affinity_mask_text())), dl);
  // Every value here is a value: a failure is a rank that ended first.
  if (const int r = where.first_failed(); r >= 0) {
    throw PeerError(fmt::format("rank {} could not learn where the ranks run: rank {}: {}", rank, r,
                                where.of_rank[static_cast<std::size_t>(r)].text),
                    r);
  }
  // Hosts in order of their lowest rank; every rank computes the same.
  std::vector<std::string> host_of(static_cast<std::size_t>(size));
  std::vector<std::string> hosts;
  std::vector<std::string> masks;
  for (int r = 0; r < size; ++r) {
    const std::string& v = where.of_rank[static_cast<std::size_t>(r)].text;
    const auto nl1 = v.find('\n'), nl2 = v.find('\n', nl1 + 1);
    if (nl1 == std::string::npos || nl2 == std::string::npos) {
      throw Error(fmt::format("mci: rank {} published a malformed host description '{}'", r, v));
    }
    host_of[r] = v.substr(0, nl1);
    if (std::find(hosts.begin(), hosts.end(), host_of[r]) == hosts.end()) hosts.push_back(host_of[r]);
    if (host_of[r] == me) out.members.push_back(r);
    if (v.substr(nl1 + 1, nl2 - nl1 - 1) == machine) {
      ++out.machine_ranks;
      masks.push_back(v.substr(nl2 + 1));
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
      throw ConfigError(
          fmt::format("MCI_TRANSPORT=shm needs every rank on one host, but {}; use "
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
  const ShmOptions o{static_cast<std::size_t>(settings.integer("MCI_SHM_BUFFER_BYTES")),
                     ShmWait{std::chrono::microseconds(settings.integer("MCI_SHM_SPIN_US")),
                             std::chrono::microseconds(settings.integer("MCI_SHM_YIELD_US"))},
                     !settings.is({"MCI_SHM_SINGLE_COPY", "never"})};
  if (out.members.size() >= 2) out.world = map_segment(store, rank, out.members, o, wait, error);
  const GroupVerdict mapped =
      agree(store, "shm/mapped", rank, size, error.empty() ? Verdict::value("") : Verdict::error(error), dl);
  const std::string failed = mapped.ok() ? "" : fmt::format("rank {}: {}", mapped.failed_rank, mapped.failure);
  if (mapped.lost) {
    // Not a reason to fall back to TCP: the group lost a member.
    if (out.world) out.world->unlink_name();
    throw PeerError(fmt::format("rank {} could not set up shared memory: {}", rank, failed), mapped.failed_rank);
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
      auto& ranks = out.hosts.emplace_back();
      for (int r = 0; r < size; ++r) {
        if (host_of[r] == h) ranks.push_back(r);
      }
    }
  }
  return out;
}

}  // namespace mci::transport
