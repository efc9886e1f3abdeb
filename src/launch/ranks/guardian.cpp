#include "launch/ranks/guardian.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "common/shm_names.hpp"

namespace mci::launch {

namespace {

// The guardian's messages: one line each, a letter then the text.
constexpr char kGroup = 'g', kForgetGroup = 'G', kDir = 'd', kForgetDir = 'D', kEmptyDir = 'e', kBye = 'q';

// The guardian's own life: read lines until the pipe closes, then act.
[[noreturn]] void guard(int from_mcirun) {
  // Only mcirun's goodbye, or mcirun's death, ends it.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGUSR1, SIGUSR2, SIGPIPE}) ::signal(sig, SIG_IGN);
  ::setpgid(0, 0);
  // It holds nothing of mcirun's but its pipe: a caller waiting for the end
  // of mcirun's output (a pipe) must not wait for the guardian too.
  if (from_mcirun != 3) {
    ::dup2(from_mcirun, 3);
    from_mcirun = 3;
  }
  ::close_range(4, ~0U, 0);
  if (const int null = ::open("/dev/null", O_RDWR); null >= 0) {
    for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
    if (null > 3) ::close(null);
  }
  std::set<pid_t> groups;
  std::set<std::string> dirs, empty_dirs;
  std::string line;
  char buf[4096];
  bool bye = false;
  while (!bye) {
    const ssize_t n = ::read(from_mcirun, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // mcirun is gone
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line += buf[i];
        continue;
      }
      const char what = line.empty() ? '\0' : line[0];
      const std::string text = line.size() > 1 ? line.substr(1) : std::string();
      if (what == kGroup) groups.insert(static_cast<pid_t>(std::stol(text)));
      if (what == kForgetGroup) groups.erase(static_cast<pid_t>(std::stol(text)));
      if (what == kDir) dirs.insert(text);
      if (what == kForgetDir) dirs.erase(text);
      if (what == kEmptyDir) empty_dirs.insert(text);
      if (what == kBye) bye = true;
      line.clear();
    }
  }
  if (!bye) {
    for (pid_t g : groups) ::kill(-g, SIGKILL);
    // Once they are gone (a second at most), the shared-memory names each
    // rank (its group's leader) made and had not yet unlinked.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    const auto any_alive = [&] {
      return std::any_of(groups.begin(), groups.end(), [](pid_t g) { return ::kill(-g, 0) == 0; });
    };
    while (any_alive() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (pid_t g : groups) (void)remove_shm_segments_of(g);
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    for (const auto& d : empty_dirs) std::filesystem::remove(d, ec);  // fails, as it should, unless empty
  }
  ::_exit(0);
}

}  // namespace

std::unique_ptr<Guardian> Guardian::start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  Fd read_end(fds[0]), write_end(fds[1]);
  const pid_t middle = ::fork();
  if (middle < 0) return nullptr;
  if (middle == 0) {
    // The middle child forks the guardian and exits at once: the guardian
    // is then nobody's child (init's, or the session's subreaper's).
    write_end.reset();
    if (::fork() == 0) guard(read_end.get());
    ::_exit(0);
  }
  read_end.reset();
  int st = 0;
  while (::waitpid(middle, &st, 0) < 0 && errno == EINTR) {
  }
  return std::make_unique<Guardian>(std::move(write_end));
}

Guardian::~Guardian() { say(kBye, {}); }

void Guardian::watch_group(pid_t pgid) { say(kGroup, std::to_string(pgid)); }
void Guardian::forget_group(pid_t pgid) { say(kForgetGroup, std::to_string(pgid)); }
void Guardian::watch_dir(const std::string& path) { say(kDir, path); }
void Guardian::forget_dir(const std::string& path) { say(kForgetDir, path); }
void Guardian::watch_empty_dir(const std::string& path) { say(kEmptyDir, path); }

void Guardian::say(char what, const std::string& text) {
  std::string line(1, what);
  line += text;
  line += '\n';
  // A guardian that died leaves mcirun as it was without one: its
  // messages are dropped (SIGPIPE is blocked or ignored in mcirun).
  (void)!::write(pipe_.get(), line.data(), line.size());
}

}  // namespace mci::launch
