// The signals mcirun reacts to (a child's exit; SIGINT, SIGTERM, SIGHUP,
// SIGQUIT and the others of --signals-to-handle to stop the job; SIGTSTP and
// SIGCONT to pause and resume it) arrive through a signalfd, so the event
// loop sees them as readable data next to the children's pipes: no handler,
// no global flag.
#pragma once

#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "common/socket.hpp"

namespace mci::launch {

class SignalFd {
 public:
  // Blocks those signals for this thread and every
  // thread it starts later (so construct it before any thread: a signal sent
  // to the process must not land in a thread that does not block it), makes
  // sure SIGCHLD is not ignored (an ignored SIGCHLD reaps children behind our
  // back) and ignores SIGPIPE (a reader that went away must not kill mcirun).
  // stop_signals: the signals that stop the job, besides SIGINT, SIGTERM
  // and SIGHUP (which always do).
  explicit SignalFd(const std::vector<int>& stop_signals = {});
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_.get(); }
  // The signals that arrived since the last call, in order.
  std::vector<int> take();

  // For a new child, between fork and exec (async-signal-safe): the signal
  // mask and the SIGPIPE/SIGCHLD actions mcirun itself started with.
  void restore_in_child() const noexcept;

 private:
  Fd fd_;
  sigset_t old_mask_{};
  struct sigaction old_pipe_ {};
  struct sigaction old_chld_ {};
};

// "SIGTERM", or "signal 77" for one without a name.
std::string signal_name(int sig);

// SIGTERM for "SIGTERM" (torchrun's spelling: the SIG name); nullopt for
// anything else.
std::optional<int> signal_by_name(const std::string& name);

// torchrun's default --signals-to-handle.
inline constexpr const char* kDefaultStopSignals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";

// Whether a signal from the signalfd asks the job to stop (not a child's
// exit, nor a pause or resume).
inline bool is_stop_signal(int sig) { return sig != SIGCHLD && sig != SIGTSTP && sig != SIGCONT; }

}  // namespace mci::launch
