// What mcirun says at the end of a job that did not succeed: which rank
// failed first and how, where it ran, and its last stderr lines (its last
// stdout lines when its stderr was empty: a traceback printed to stdout),
// and for a Python rank that could not import a module, which interpreter
// ran it and how to choose another. Under --on-rank-loss=continue, each
// lost rank the same way, and how the survivors ended; under replace, also
// which process took each lost one's place, or why none did.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mci::launch {

// "exit code 1", "signal SIGSEGV (core dumped)", from a waitpid status.
std::string describe_exit(int wait_status);
bool exited_ok(int wait_status);

struct RankReport {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  std::optional<int> wait_status;  // nullopt: never reaped (should not happen)
  int signal_sent = 0;             // the last signal mcirun sent it (SIGTERM, SIGKILL), 0 if none
  std::vector<std::string> stderr_tail;
  std::vector<std::string> stdout_tail;
  // What torch's @record wrote to the rank's TORCHELASTIC_ERROR_FILE.
  std::optional<std::string> python_exception;
  // --on-rank-loss=continue: when it was lost, since its start; unset for a survivor.
  std::optional<std::chrono::milliseconds> lost_at;
  // --on-rank-loss=replace: K when this process is replacement K (0: it
  // started with the job); for a lost one, its replacement (index into
  // JobReport::ranks) or why it has none.
  int replacement = 0;
  std::optional<std::size_t> replaced_by;
  std::string not_replaced;
};

struct JobReport {
  std::string host;
  int node_rank = 0;
  std::optional<std::size_t> first_failure;  // index into ranks
  std::optional<int> stop_signal;            // mcirun was told to stop
  std::string stop_origin;                   // another node's mcirun was: "node N (host H)"
  // The Python interpreter the ranks ran under ("" when the program is not
  // Python), and what chose it ("MCI_PYTHON", "PATH", "the command line").
  std::string python;
  std::string python_from;
  std::string peer_failure;            // another node's failure, as it reported it
  bool store_lost = false;             // peer_failure says how this node lost the job's store
  std::string start_error;             // a rank that could not start
  bool on_rank_loss_continue = false;  // the others go on after a loss: continue or replace
  bool replace = false;                // --on-rank-loss=replace
  bool multi_node = false;             // "of this node" where the other nodes' ranks are not counted
  std::vector<std::size_t> lost;       // --on-rank-loss=continue: indexes into ranks, in the order they were lost
  std::vector<RankReport> ranks;
};

// The summary block, one string per line, each starting with "mcirun: ".
std::vector<std::string> summary_lines(const JobReport& job);

}  // namespace mci::launch
