#include "launch/nodes/torch_store.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "launch/ranks/child_process.hpp"
#include "mci/errors.hpp"

namespace mci::launch {
namespace {

// Binds every interface (the other nodes reach it at MASTER_ADDR), prints
// "ready" once it listens, then waits to be ended. wait_for_workers=False:
// the ranks come and go (a lost rank, a replacement) while it serves.
// Once ready, its stdout and stderr go to /dev/null: nobody reads its pipes
// after the start, and a store that filled one (torch logs a warning per
// client lost) would block, and every rank with it.
constexpr const char* kScript = R"(import datetime, os, signal, sys
from torch.distributed import TCPStore
store = TCPStore("0.0.0.0", int(sys.argv[1]), is_master=True, wait_for_workers=False,
                 timeout=datetime.timedelta(seconds=60))
print("ready", flush=True)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
while True:
    signal.pause()
)";

// Everything the child has written to fd so far, without waiting.
std::string drain(int fd) {
  std::string text;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

std::string last_lines(const std::string& text, int n) {
  std::size_t at = text.size();
  while (n-- > 0 && at > 0) {
    const auto nl = text.rfind('\n', at - 1);
    if (nl == std::string::npos) return text;
    at = nl;
    if (at == text.size() - 1) ++n;  // a trailing newline is not a line
  }
  return text.substr(at == 0 ? 0 : at + 1);
}

}  // namespace

TorchStoreKeeper::TorchStoreKeeper(const std::string& python, const std::vector<std::string>& env, int port,
                                   const SignalFd& signals, std::chrono::milliseconds limit) {
  ExecSpec spec(python, {python, "-c", kScript, std::to_string(port)});
  StartedChild c = start_child(spec, env, signals);
  pid_ = c.pid;
  out_ = std::move(c.out);
  err_ = std::move(c.err);
  // Wait for "ready" on its stdout, or for it to end.
  const Deadline dl(limit);
  std::string said;
  while (said.find("ready") == std::string::npos) {
    pollfd p{out_.get(), POLLIN, 0};
    const int n = dl.expired() ? 0 : ::poll(&p, 1, dl.poll_ms());
    if (n > 0) {
      char buf[256];
      const ssize_t got = ::read(out_.get(), buf, sizeof buf);
      if (got > 0) said.append(buf, static_cast<std::size_t>(got));
      if (got <= 0) {
        // It ended before it listened.
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        throw Error(fmt::format("{} could not host torch's store on port {}: {}", python, port,
                                last_lines(drain(err_.get()), 3)));
      }
    } else if (dl.expired()) {
      const std::string why = last_lines(drain(err_.get()), 3);
      stop();
      throw Error(fmt::format("{} did not host torch's store on port {} within {} s{}", python, port,
                              limit.count() / 1000, why.empty() ? "" : ": " + why));
    }
  }
}

TorchStoreKeeper::~TorchStoreKeeper() { stop(); }

void TorchStoreKeeper::stop() noexcept {
  if (pid_ <= 0) return;
  // Ended on its own and reaped with the ranks' orphans (the supervisor
  // waits for any child): nothing to stop, and the pid may be another's.
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != 0) {
    pid_ = -1;
    return;
  }
  ::kill(pid_, SIGTERM);
  if (!wait_for_exit(pid_, std::chrono::seconds(3))) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

}  // namespace mci::launch
