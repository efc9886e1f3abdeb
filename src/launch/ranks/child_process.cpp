#include "launch/ranks/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

namespace mci::launch {

namespace {

struct Pipe {
  Fd read, write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "mcirun: pipe");
  return {Fd(fds[0]), Fd(fds[1])};
}

// argv/envp as execve wants them, built before fork: between fork and exec
// the child of a threaded process may not allocate.
struct CStrings {
  explicit CStrings(const std::vector<std::string>& v) {
    ptrs.reserve(v.size() + 1);
    for (const auto& s : v) ptrs.push_back(const_cast<char*>(s.c_str()));
    ptrs.push_back(nullptr);
  }
  std::vector<char*> ptrs;
};

[[noreturn]] void exec_child(const ExecSpec& program, char* const* argv, char* const* envp, int out, int err,
                             int report, pid_t parent, const SignalFd& signals, const cpu_set_t* cpus,
                             int keep_fd) noexcept {
  // Only async-signal-safe calls from here on.
  ::setpgid(0, 0);
  // A CPU the kernel refuses leaves the rank unpinned rather than unstarted:
  // the banner already said where it was meant to run.
  if (cpus) (void)::sched_setaffinity(0, sizeof *cpus, cpus);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // mcirun died before prctl took effect
  signals.restore_in_child();
  if (keep_fd >= 0) (void)::fcntl(keep_fd, F_SETFD, 0);
  if (::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) {
    const int e = errno;
    (void)!::write(report, &e, sizeof e);
    ::_exit(127);
  }
  ::execve(program.path.c_str(), argv, envp);
  const int e = errno;
  (void)!::write(report, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

StartedChild start_child(const ExecSpec& program, const std::vector<std::string>& env, const SignalFd& signals,
                         const std::vector<int>& cpus, int keep_fd) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &mask);
  }
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Pipe report = make_pipe();  // closed by a successful exec (O_CLOEXEC)
  CStrings argv(program.argv);
  CStrings envp(env);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "mcirun: fork");
  if (pid == 0) {
    exec_child(program, argv.ptrs.data(), envp.ptrs.data(), out.write.get(), err.write.get(), report.write.get(),
               parent, signals, cpus.empty() ? nullptr : &mask, keep_fd);
  }
  // Also from here: a signal sent to the group before the child ran
  // setpgid must still reach it. EACCES means it already exec'd, and did it.
  ::setpgid(pid, pid);
  out.write.reset();
  err.write.reset();
  report.write.reset();

  int child_errno = 0;
  ssize_t r;
  do {
    r = ::read(report.read.get(), &child_errno, sizeof child_errno);
  } while (r < 0 && errno == EINTR);
  if (r == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw CannotRun(program.argv.front(), child_errno,
                    child_errno == ENOEXEC ? " (a script needs a first line like #!/bin/sh)" : "");
  }
  StartedChild c;
  c.pid = pid;
  c.out = std::move(out.read);
  c.err = std::move(err.read);
  return c;
}

bool process_exiting(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // "pid (comm) S ppid pgrp session tty tpgid flags ...": comm may hold
  // spaces and parentheses, so fields are counted after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  char state = 0;
  long skip = 0;
  unsigned long flags = 0;
  fields >> state >> skip >> skip >> skip >> skip >> skip >> flags;
  constexpr unsigned long kPfExiting = 0x4;
  return state == 'Z' || state == 'X' || (fields && (flags & kPfExiting));
}

std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds limit) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, static_cast<int>(limit.count())) < 0 && errno == EINTR) {
    }
    ::close(fd);
  }
  int st = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &st, WNOHANG)) < 0 && errno == EINTR) {
  }
  return r == pid ? std::optional<int>(st) : std::nullopt;
}

}  // namespace mci::launch
