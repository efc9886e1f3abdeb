// Open files a job needs, checked against RLIMIT_NOFILE before anything
// starts: mcirun holds two pipes per local rank and, on node 0, the store's
// connections from every rank; each rank holds its store connections and
// one socket per peer it talks to (every peer with MCI_CONNECT=eager). The
// ranks inherit mcirun's limit, so one check covers both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mci::launch {

struct FdNeed {
  std::uint64_t launcher = 0;  // mcirun itself
  std::uint64_t per_rank = 0;  // each rank
  bool eager = false;          // MCI_CONNECT=eager: a socket per peer
  std::uint64_t total() const { return launcher > per_rank ? launcher : per_rank; }
};

FdNeed fd_need(int nproc_per_node, int world_size, bool hosts_store, bool eager_connect);

struct FdCheck {
  bool ok = true;
  std::string message;  // what was raised, or why the job cannot start; empty when nothing to say
};

// Raises the soft limit to what the job needs when the hard limit allows
// (saying so); otherwise ok=false with a message naming both numbers and
// what to do. `soft`/`hard` override the process's own (for tests).
FdCheck ensure_fds(const FdNeed& need, std::optional<std::uint64_t> soft = std::nullopt,
                   std::optional<std::uint64_t> hard = std::nullopt);

}  // namespace mci::launch
