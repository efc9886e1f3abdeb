// Starting real processes from tests: each child gets its own environment,
// its output goes to a file the test reads, and every child is killed and
// reaped when the Spawner goes away, so a failing test leaves no orphans.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mci::test {

struct ExitStatus {
  bool exited = false;  // normal exit (code) vs killed by a signal (sig)
  int code = -1;
  int sig = 0;
  bool timed_out = false;  // the test's own limit ran out and we killed it
};

struct Child {
  pid_t pid = -1;
  std::string output_path;
  std::optional<ExitStatus> status;
  std::string output() const;
};

class Spawner {
 public:
  Spawner();
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Runs argv with the current environment plus `env` (a value of "\x01"
  // removes the variable). Returns an index into children().
  std::size_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                    bool new_session = false);
  // Waits for every child; kills the rest with SIGKILL after `limit`.
  void wait_all(std::chrono::milliseconds limit);
  ExitStatus wait(std::size_t i, std::chrono::milliseconds limit);
  void kill_all(int sig);
  Child& child(std::size_t i) { return children_[i]; }
  std::vector<Child>& children() { return children_; }

 private:
  std::string dir_;
  std::vector<Child> children_;
};

// Path of a program built next to the tests (set by CMake).
std::string built(const std::string& name);

// True if a process with this pid exists and is not a zombie.
bool process_alive(pid_t pid);

// mci's shared-memory segments in /dev/shm now, sorted (what a job must
// not leave behind).
std::vector<std::string> mci_shm_segments();
// The segments that `pids` created (mci-PID-...): a test's own, whatever the
// tests running beside it hold.
std::vector<std::string> mci_shm_segments_of(const std::vector<pid_t>& pids);

}  // namespace mci::test
