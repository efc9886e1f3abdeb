// Starting one process of the job: its own process group (so a stop reaches
// whatever it started too), SIGKILL when mcirun dies, its stdout and stderr
// on pipes to mcirun, and an exec failure reported as an error, not as a
// process that exits 127.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/socket.hpp"
#include "launch/config/program.hpp"
#include "launch/ranks/signals.hpp"

namespace mci::launch {

struct StartedChild {
  pid_t pid = -1;  // also its process group id
  Fd out;          // read ends of its stdout and stderr
  Fd err;
};

// Throws CannotRun when execve fails in the child (the child is reaped
// first), std::system_error when a pipe or fork fails.
// `cpus`, when not empty, is the CPU affinity the child starts with (set
// before exec, so every thread it starts inherits it).
// `keep_fd`, when not -1, is a close-on-exec descriptor of ours the child
// keeps open across exec (its status block under --monitor).
StartedChild start_child(const ExecSpec& program, const std::vector<std::string>& env, const SignalFd& signals,
                         const std::vector<int>& cpus = {}, int keep_fd = -1);

// Whether the kernel has begun ending this process: it is a zombie, or its
// main thread carries PF_EXITING, which the kernel sets before it closes the
// process's files and sockets (what its peers notice first).
bool process_exiting(pid_t pid);
// Waits up to `limit` for a child that is already exiting and reaps it: its
// wait status, or nullopt when it did not end in time.
std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds limit);

}  // namespace mci::launch
