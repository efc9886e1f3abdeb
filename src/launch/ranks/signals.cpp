#include "launch/ranks/signals.hpp"

#include <pthread.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace mci::launch {

SignalFd::SignalFd(const std::vector<int>& stop_signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT}) sigaddset(&set, s);
  for (int s : stop_signals) sigaddset(&set, s);
  if (int rc = ::pthread_sigmask(SIG_BLOCK, &set, &old_mask_); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "mcirun: blocking signals");
  }
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, &old_pipe_);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, &old_chld_);
  fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd_.valid()) {
    const int e = errno;
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    throw std::system_error(e, std::generic_category(), "mcirun: signalfd");
  }
}

SignalFd::~SignalFd() {
  // What is still pending would take its default action once unblocked:
  // read it first (the owner had its chance to act on it).
  (void)take();
  fd_.reset();
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalFd::take() {
  std::vector<int> out;
  signalfd_siginfo info[16];
  while (true) {
    const ssize_t r = ::read(fd_.get(), info, sizeof info);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(r) / sizeof(signalfd_siginfo); ++i) {
      out.push_back(static_cast<int>(info[i].ssi_signo));
    }
  }
  return out;
}

void SignalFd::restore_in_child() const noexcept {
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::optional<int> signal_by_name(const std::string& name) {
  if (name.rfind("SIG", 0) != 0) return std::nullopt;
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    if (abbrev && name.compare(3, std::string::npos, abbrev) == 0) return sig;
  }
  return std::nullopt;
}

}  // namespace mci::launch
