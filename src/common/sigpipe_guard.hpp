// A write to a socket whose peer has gone raises SIGPIPE, whose default
// action kills the whole process before the caller can report the broken
// pipe: Gloo's writev(), and OpenSSL's writes under the etcd store's TLS
// connections, do not pass MSG_NOSIGNAL. Instead of changing the
// process-wide disposition (the user's), the threads that call into them
// block SIGPIPE while they do: the write then fails with EPIPE, and a
// SIGPIPE left pending is discarded before the mask is restored. Gloo's
// device thread inherits the mask of the thread that creates the device, so
// it never sees the signal at all.
#pragma once

#include <csignal>
#include <ctime>

#include <pthread.h>

namespace mci {

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

}  // namespace mci
