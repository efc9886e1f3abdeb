// The event loop of one node: it relays the processes' output, notices an
// exit the moment it happens (SIGCHLD through the signalfd, no polling
// interval), and stops the job when a process fails, when mcirun is told to
// stop, or when another node reports a failure or a stop. Each step goes to
// every rank's process group still running, each rank named on stderr, one
// grace period (--grace) after the step before:
//   a process failed:     SIGTERM, then SIGKILL;
//   mcirun got SIGINT:    SIGINT (Python's KeyboardInterrupt, as a terminal's
//                         Ctrl-C gives it under torchrun), then SIGTERM, then
//                         SIGKILL;
//   mcirun got SIGTERM or SIGHUP: that signal, then SIGKILL;
// another node's stop is passed on the same way, with the signal that node
// got. Then a summary of the first failure, and exit code 1 (128+N after
// signal N).
// With --on-rank-loss=continue, a rank that fails is lost instead: one line
// says so, what it left in its process group gets SIGTERM (then SIGKILL),
// and the others go on; the summary lists the lost ranks, and the exit code
// is 0 when at least one rank survived and every survivor exited 0. Other
// nodes are not told (they go on too), but node 0 still waits for them.
// Each rank leads its own process group and mcirun is a subreaper, so what a
// rank leaves behind is stopped the same way and nothing outlives mcirun
// (short of a process that leaves the group with setsid).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/job_config.hpp"
#include "launch/node_link.hpp"
#include "launch/signals.hpp"
#include "launch/stream_relay.hpp"
#include "launch/summary.hpp"
#include "launch/worker_logs.hpp"

namespace mci::launch {

struct RankSpec {
  int rank = 0;
  int local_rank = 0;
  std::vector<std::string> env;
  std::vector<int> cpus;  // its CPU affinity (mcirun --bind); empty: inherited
  RankStreams streams;    // where its stdout and stderr go (console, log files)
};

class Supervisor {
 public:
  // link: null for a one-node job.
  Supervisor(const JobConfig& job, SignalFd& signals, NodeLink* link);
  // Kills (SIGKILL) and reaps whatever is still running: only an exception
  // leaves run() with processes alive, and they must not outlive us.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the ranks in order; a rank that cannot start stops the job (the
  // ones already running get SIGTERM) and run() then reports it.
  void start(const std::vector<RankSpec>& ranks);
  // Until every process has exited (and, on node 0 of a multi-node job,
  // every node has finished). Returns mcirun's exit code.
  int run();
  // After run(): whether a rank failed, on this node or another, which is
  // what --max-restarts restarts; not a stop by signal, a rank that could
  // not start (it would not start the next time either) or a lost store.
  bool rank_failed() const;
  // After run(): that failure in one line, for the restarts' history:
  // "rank 1 (pid 42 on node7) failed: signal SIGKILL" (with the Python
  // exception it recorded), or another node's report.
  std::string failure_line() const;

 private:
  struct Proc {
    int rank;
    int local_rank;
    pid_t pid;
    StreamRelay out;
    StreamRelay err;
    std::optional<int> status;
    int signal_sent = 0;
    // --on-rank-loss=continue: when it was lost (since start()), and when
    // what it left in its process group gets SIGKILL if still there.
    std::optional<std::chrono::milliseconds> lost_at;
    std::optional<std::chrono::steady_clock::time_point> group_kill_at;
  };
  enum class Phase { running, stopping };

  RelaySinks sinks_for(const StreamPlan& plan, int console);
  bool all_exited() const;
  static bool group_alive(const Proc& p);
  bool any_group_alive() const;
  void reap();
  void on_exit(Proc& p);
  // --on-rank-loss=continue: p failed, the others go on.
  void on_loss(Proc& p);
  // The lost ranks' process groups whose SIGKILL is due; and when the next is.
  void kill_lost_groups();
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const;
  bool goes_on() const { return job_.on_rank_loss == OnRankLoss::go_on; }
  // Whether the job ended only with losses, the survivors' own outcome to
  // judge: no stop by signal, no failure elsewhere, no rank that could not start.
  bool only_losses() const;
  // A rank that was already exiting when `failed` failed, once it has
  // exited itself with a failure; nullptr when there is none.
  Proc* exiting_before(const Proc& failed);
  void signal_groups(int sig);
  // first now, then each of `then` one grace period after the one before.
  void begin_stop(int first = SIGTERM);
  void send_step(int sig);
  void next_step();
  void begin_stop_stragglers();
  void kill_remaining();
  void on_peer_stop(const NodeLink::Event& e);
  void on_signal(int sig);
  void pause_or_resume(int sig);
  void on_link_events();
  int wait_for_other_nodes();
  int exit_code() const;
  void print_summary() const;

  const JobConfig& job_;
  SignalFd& signals_;
  NodeLink* link_;
  std::string host_;
  std::vector<Proc> procs_;
  std::chrono::steady_clock::time_point started_at_;
  std::vector<std::size_t> losses_;         // --on-rank-loss=continue: indexes into procs_, in order
  std::map<std::string, Fd> shared_files_;  // filtered_stdout.log and filtered_stderr.log
  std::vector<char> buf_;
  Phase phase_ = Phase::running;
  std::vector<int> steps_left_;  // the signals still to send if ranks outlive the grace
  int last_sent_ = 0;            // the last signal of this stop so far
  std::optional<std::chrono::steady_clock::time_point> next_step_at_;
  bool killed_ = false;
  bool groups_settled_ = false;  // run() saw every rank's process group empty (or gave up)
  std::optional<std::size_t> first_failure_;
  std::optional<int> stop_signal_;
  std::string stop_origin_;  // another node's mcirun got stop_signal_: "node N (host H)"
  std::string peer_failure_;
  bool store_lost_ = false;
  std::string start_error_;
};

}  // namespace mci::launch
