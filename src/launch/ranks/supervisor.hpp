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
// With --on-rank-loss=replace, the same, and a new process starts in the
// lost one's place (its command, environment, CPUs and output, plus
// MCI_REPLACEMENT=K), up to the node's cap; past it, a loss is as under
// continue (supervisor_loss.cpp).
// Each rank leads its own process group and mcirun is a subreaper, so what a
// rank leaves behind is stopped the same way and nothing outlives mcirun
// (short of a process that leaves the group with setsid).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/attempt.hpp"
#include "launch/config/job_config.hpp"
#include "launch/nodes/node_adopter.hpp"
#include "launch/nodes/node_link.hpp"
#include "launch/output/stream_relay.hpp"
#include "launch/output/summary.hpp"
#include "launch/output/worker_logs.hpp"
#include "launch/ranks/guardian.hpp"
#include "launch/ranks/signals.hpp"

namespace mci::jobview {
class JobMonitor;
}

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
  // The ranks of `attempt` (placed from it: launch/attempt.hpp); link: null
  // for a one-node job; monitor: null without --monitor; guardian: null
  // when none runs (guardian.hpp: told each rank's process group).
  Supervisor(const JobConfig& job, const Attempt& attempt, SignalFd& signals, NodeLink* link,
             jobview::JobMonitor* monitor = nullptr, Guardian* guardian = nullptr);
  // Kills (SIGKILL) and reaps whatever is still running: only an exception
  // leaves run() with processes alive, and they must not outlive us.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the ranks in order; a rank that cannot start stops the job (the
  // ones already running get SIGTERM) and run() then reports it.
  void start(const std::vector<RankSpec>& ranks);
  // --on-rank-loss=replace on several nodes: the ranks of each node that
  // `adopter` claims (a node lost whole: nodes/node_adopter.hpp) start here
  // as replacements, within this node's cap. specs(node, first_local): that
  // node's ranks, numbered on this node from local rank first_local (past
  // this node's own, so that their files and devices stay apart).
  using AdoptedSpecs = std::function<std::vector<RankSpec>(int node, int first_local)>;
  void adopt_with(NodeAdopter* adopter, AdoptedSpecs specs);
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
    Proc(const RankSpec& spec, pid_t pid, StreamRelay out, StreamRelay err, int replacement);

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
    // --on-rank-loss=replace: K for replacement K (0: started with the job);
    // for a lost one, the index of its replacement in procs_ or why none
    // started, and (kept: read) the exception it recorded, read before its
    // replacement could write the same error file.
    int replacement = 0;
    std::optional<std::size_t> replaced_by;
    std::string not_replaced;
    bool kept = false;
    std::optional<std::string> recorded;
  };
  enum class Phase { running, stopping };

  // append: a replacement's output goes after its lost predecessor's in
  // the same log files.
  RelaySinks sinks_for(const StreamPlan& plan, int console, bool append = false);
  // Starts one process (replacement K, or 0 for the job's own) and adds it
  // to procs_, which may move every Proc: callers hold indexes across it.
  void launch(const RankSpec& spec, int replacement);
  bool all_exited() const;
  static bool group_alive(const Proc& p);
  bool any_group_alive() const;
  void reap();
  void on_exit(Proc& p);
  // --on-rank-loss=continue or replace: p failed, the others go on; under
  // replace, p's replacement is queued for start_replacements().
  void on_loss(Proc& p);
  // The replacements on_loss queued, started once reap() no longer holds
  // references into procs_; each loss's line, then its group's cleanup.
  void start_replacements();
  // The ranks of the nodes the adopter claimed, started as replacements.
  void adopt_nodes();
  // Tells the adopter how many replacements this node may still start.
  void tell_adopter_room();
  // Under replace, why the next loss gets no replacement ("" when it does).
  std::string replacement_refused() const;
  // Preserves p's recorded exception, and moves its error file out of its
  // replacement K's way.
  void keep_error_file(Proc& p, int k);
  // The loss line: "rank 2 (pid 4242 on node7) was lost at 12.3 s (signal
  // SIGKILL); --on-rank-loss=<policy>: " + what.
  void say_lost(const Proc& p, const std::string& what) const;
  // "the 2 other rank(s) go on", or that none is left.
  std::string others_go_on() const;
  // SIGTERM to what a lost rank left in its process group (SIGKILL after --grace).
  void end_lost_group(Proc& p);
  // The lost ranks' process groups whose SIGKILL is due; and when the next is.
  void kill_lost_groups();
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const;
  bool goes_on() const { return job_.on_rank_loss != OnRankLoss::stop; }
  bool replaces() const { return job_.on_rank_loss == OnRankLoss::replace; }
  // Whether the job ended only with losses, the survivors' own outcome to
  // judge: no stop by signal, no failure elsewhere, no rank that could not start.
  bool only_losses() const;
  // A rank that was already exiting when `failed` failed, once it has
  // exited itself with a failure; nullptr when there is none.
  Proc* exiting_before(const Proc& failed);
  void signal_groups(int sig);
  static void wake_to_receive(const Proc& p, int sig);
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
  std::string store_lost_text(const std::string& seen) const;
  int wait_for_other_nodes();
  int exit_code() const;
  void print_summary() const;

  const JobConfig& job_;
  const Attempt& attempt_;
  SignalFd& signals_;
  NodeLink* link_;
  NodeAdopter* adopter_ = nullptr;
  AdoptedSpecs adopted_specs_;
  Guardian* guardian_;
  jobview::JobMonitor* monitor_;
  std::string host_;
  std::vector<Proc> procs_;
  std::vector<RankSpec> specs_;  // how each rank here started: what a replacement starts again
  std::chrono::steady_clock::time_point started_at_;
  std::vector<std::size_t> losses_;         // --on-rank-loss=continue: indexes into procs_, in order
  std::vector<std::size_t> pending_;        // --on-rank-loss=replace: lost, replacement not started yet
  int replacements_ = 0;                    // started on this node
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
