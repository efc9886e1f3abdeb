// Gloo writes to its sockets with writev(), which raises SIGPIPE when the
// peer has already gone; the default action kills the whole process before
// Gloo can report the broken pipe (Python ignores SIGPIPE, so Gloo under
// PyTorch never meets this). Instead of changing the process-wide disposition,
// the threads that call into Gloo block SIGPIPE while they do: the write then
// fails with EPIPE, Gloo throws, and a SIGPIPE left pending is discarded
// before the mask is restored. Gloo's device thread inherits the mask of the
// thread that creates the device, so it never sees the signal at all.
#pragma once

#include <csignal>
#include <ctime>

#include <pthread.h>

namespace mci::gloo_backend {

class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (sigismember(&old_, SIGPIPE)) return;  // the caller had it blocked already
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec now{};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

}  // namespace mci::gloo_backend
