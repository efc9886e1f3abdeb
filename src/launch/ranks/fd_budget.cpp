#include "launch/ranks/fd_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace mci::launch {

namespace {
// Standard streams, the signalfd, the store's listener and wake pipe, the
// node link, libraries' own: what any job needs besides its ranks.
constexpr std::uint64_t kBase = 64;
}  // namespace

FdNeed fd_need(int nproc_per_node, int world_size, bool hosts_store, bool eager_connect) {
  const auto local = static_cast<std::uint64_t>(std::max(nproc_per_node, 1));
  const auto world = static_cast<std::uint64_t>(std::max(world_size, 1));
  FdNeed n;
  // Per local rank: its stdout and stderr pipes; on node 0, two store
  // connections per rank of the world (the rank's own and its hang-report
  // responder's).
  n.launcher = kBase + 2 * local + (hosts_store ? 2 * world : 0);
  // Lazy: the peers of the default algorithms, about 2 log2(n) + 2 (ring
  // neighbours, recursive-doubling partners, tree parent and children).
  const std::uint64_t peers = eager_connect ? world - 1 : 2 * static_cast<std::uint64_t>(std::bit_width(world)) + 2;
  n.per_rank = kBase + peers;
  n.eager = eager_connect;
  return n;
}

FdCheck ensure_fds(const FdNeed& need, std::optional<std::uint64_t> soft, std::optional<std::uint64_t> hard) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const bool real = !soft && !hard;
  const std::uint64_t cur = soft.value_or(rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur);
  const std::uint64_t max = hard.value_or(rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : rl.rlim_max);
  const std::uint64_t want = need.total();
  FdCheck out;
  if (cur >= want) return out;
  if (max < want) {
    out.ok = false;
    out.message = fmt::format(
        "mcirun: this job needs about {} open files (mcirun {}, each rank {}) but the hard limit is {}: raise it "
        "(ulimit -Hn {} as root, or nofile in /etc/security/limits.conf){}",
        want, need.launcher, need.per_rank, max, want,
        need.eager ? ", or leave MCI_CONNECT unset (lazy: each rank connects only to the peers it uses)"
                   : ", or run fewer ranks per node");
    return out;
  }
  if (real) {
    rl.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      out.ok = false;
      out.message = fmt::format(
          "mcirun: this job needs about {} open files but the soft limit is {} and could not "
          "be raised: raise it with ulimit -n {}",
          want, cur, want);
      return out;
    }
  }
  out.message = fmt::format(
      "mcirun: raised the open-file soft limit from {} to {} for this job (mcirun {}, each rank "
      "{}; hard limit {})",
      cur, want, need.launcher, need.per_rank, max);
  return out;
}

}  // namespace mci::launch
