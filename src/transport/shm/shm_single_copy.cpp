// Single copy between the ranks of one host: a rank reads what it needs
// straight from a peer's buffer with process_vm_readv (Linux's cross-memory
// attach, CMA, as Open MPI's shared-memory transport does), one copy where
// staging through the segment takes two. The kernel allows it between
// processes of one user unless Yama's ptrace_scope says otherwise: at 1
// (the default of several distributions) only a process's declared tracer
// may, so a rank that allows single copy declares any process of its user
// one (PR_SET_PTRACER_ANY, what Open MPI does); at 2 or 3, or under a
// seccomp filter that refuses the call, the probe fails and every rank of
// the world stages instead.
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/log.hpp"
#include "mci/errors.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::transport {

namespace {

// Yama's ptrace_scope, or 0 where Yama is not built in.
int yama_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int v = 0;
  return f >> v ? v : 0;
}

// Lets peers read this process, where Yama needs it. False when no peer can.
bool open_to_peers() {
  const int scope = yama_scope();
  if (scope >= 2) return false;
  if (scope == 1 && ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0) return false;
  return true;
}

// What a rank posts in the first probe step.
struct ProbeCard {
  std::uint64_t allowed;
  std::uint64_t address;  // of its probe word
};
static_assert(sizeof(ProbeCard) <= kShmSmallBytes);

}  // namespace

bool ShmWorld::single_copy(const Fingerprint& fp, const Deadline& dl) {
  if (single_copy_ != SingleCopy::unknown) return single_copy_ == SingleCopy::yes;
  // Step 1: every rank says whether it allows single copy and where its
  // probe word is. Step 2: whether it could read every peer's.
  const ProbeCard mine{single_copy_allowed_ && open_to_peers() ? 1u : 0u,
                       reinterpret_cast<std::uintptr_t>(&probe_word_)};
  std::uint64_t s = next_step();
  std::memcpy(small(rank_, s), &mine, sizeof mine);
  post_ready(s, fp);
  wait_ready(s, fp, dl);
  std::uint64_t ok = mine.allowed;
  std::string why = ok ? "" : "not allowed on this rank (MCI_SHM_SINGLE_COPY=never, or Yama's ptrace_scope >= 2)";
  for (int r = 0; r < size_ && ok; ++r) {
    if (r == rank_) continue;
    ProbeCard theirs{};
    std::memcpy(&theirs, small(r, s), sizeof theirs);
    if (!theirs.allowed) {
      ok = 0;
      why = fmt::format("rank {} does not allow it", group_rank(r));
      break;
    }
    std::uint64_t word = 0;
    try {
      read_peer(r, theirs.address, &word, sizeof word);
    } catch (const Error& e) {
      why = e.what();
    }
    if (word != probe_word_) ok = 0;
  }
  s = next_step();
  std::memcpy(small(rank_, s), &ok, sizeof ok);
  post_ready(s, fp);
  wait_ready(s, fp, dl);
  bool all = true;
  for (int r = 0; r < size_; ++r) {
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, small(r, s), sizeof theirs);
    all = all && theirs != 0;
  }
  single_copy_ = all ? SingleCopy::yes : SingleCopy::no;
  if (!all && !why.empty()) log::debug("shared memory: single copy is off ({}); ranks stage their data", why);
  return all;
}

void ShmWorld::read_peer(int r, std::uintptr_t from, void* to, std::size_t len) const {
  const auto pid = static_cast<pid_t>(seg_.control(r).pid.load(std::memory_order_acquire));
  auto* dst = static_cast<std::uint8_t*>(to);
  while (len > 0) {
    iovec local{dst, len};
    iovec remote{reinterpret_cast<void*>(from), len};
    const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      if (err == ESRCH) {
        throw PeerError(fmt::format("rank {} (pid {}) exited while rank {} read its buffer in shared memory",
                                    group_rank(r), pid, group_rank(rank_)),
                        group_rank(r));
      }
      throw Error(
          fmt::format("rank {} could not read rank {}'s buffer (pid {}) with process_vm_readv: {}; set "
                      "MCI_SHM_SINGLE_COPY=never to stage through shared memory instead",
                      group_rank(rank_), group_rank(r), pid, std::strerror(err)));
    }
    dst += n;
    from += static_cast<std::uintptr_t>(n);
    len -= static_cast<std::size_t>(n);
  }
}

void ShmWorld::wait_read(std::uint64_t step, const Fingerprint& fp, const Deadline& dl) {
  wait_all(Flag::reduced, step, fp, dl, "waiting for the others to read this rank's buffer");
}

}  // namespace mci::transport
