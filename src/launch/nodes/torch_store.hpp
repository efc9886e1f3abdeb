// torch's own store for a PyTorch job, hosted by node 0's launcher rather
// than by the program's rank 0: env:// meets on a TCPStore at MASTER_ADDR:
// MASTER_PORT, and when rank 0 hosts it, losing rank 0 loses the store
// every survivor's torch group leans on (shrink_group, new groups, the
// replacement's join). torchrun's agent hosts it for the same reason; the
// ranks are told with TORCHELASTIC_USE_AGENT_STORE=True and connect to it.
//
// The keeper is the program's own interpreter running torch's TCPStore
// (so the protocol is torch's, whatever its version), started before the
// ranks and ended after the job. mcirun starts one for a Python program
// with torch whose job goes on after a lost rank (--on-rank-loss=continue
// or replace); a job that stops at the first loss keeps torchrun's
// standalone layout (rank 0 hosts it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/socket.hpp"
#include "launch/ranks/signals.hpp"

namespace mci::launch {

class TorchStoreKeeper {
 public:
  // Starts `python` hosting torch's TCPStore on `port` (every interface),
  // and waits until it listens, at most `limit`. Throws mci::Error saying
  // why it could not (what the interpreter printed).
  TorchStoreKeeper(const std::string& python, const std::vector<std::string>& env, int port, const SignalFd& signals,
                   std::chrono::milliseconds limit = std::chrono::seconds(60));
  // SIGTERM, SIGKILL after a moment; reaped.
  ~TorchStoreKeeper();
  TorchStoreKeeper(const TorchStoreKeeper&) = delete;
  TorchStoreKeeper& operator=(const TorchStoreKeeper&) = delete;

  pid_t pid() const { return pid_; }

 private:
  void stop() noexcept;

  pid_t pid_ = -1;
  Fd out_;
  Fd err_;
};

}  // namespace mci::launch
