#include "launch/ranks/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include <fmt/format.h>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "common/shm_names.hpp"
#include "common/socket.hpp"
#include "jobview/job_monitor.hpp"
#include "launch/config/rank_loss.hpp"
#include "launch/output/error_files.hpp"
#include "launch/ranks/child_env.hpp"
#include "launch/ranks/child_process.hpp"

namespace mci::launch {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kTailLines = 20;
// Node 0 keeps the store up this long for nodes still running after its own
// processes are done (torchrun's exit barrier waits as long).
constexpr auto kOtherNodesLimit = std::chrono::seconds(300);
constexpr auto kOtherNodesNotice = std::chrono::seconds(2);
// After SIGKILL, how long to wait for the killed processes to be gone
// (SIGKILL cannot be refused, but a process stuck in the kernel dies late).
constexpr auto kSettle = std::chrono::seconds(2);

int poll_timeout(std::optional<Clock::time_point> until) {
  if (!until) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

}  // namespace

Supervisor::Supervisor(const JobConfig& job, const Attempt& attempt, SignalFd& signals, NodeLink* link,
                       jobview::JobMonitor* monitor, Guardian* guardian)
    : job_(job),
      attempt_(attempt),
      signals_(signals),
      link_(link),
      guardian_(guardian),
      monitor_(monitor),
      host_(host_name()),
      buf_(kReadChunk) {}

Supervisor::~Supervisor() {
  for (auto& p : procs_) {
    // After run() finished, the groups of exited ranks are known empty: a
    // group id could now belong to someone else.
    if (guardian_) guardian_->forget_group(p.pid);
    if (p.status && groups_settled_) continue;
    ::kill(-p.pid, SIGKILL);
    if (p.status) continue;
    ::kill(p.pid, SIGKILL);
    int st = 0;
    while (::waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

namespace {

Fd open_log(const std::string& path, bool append) {
  Fd f(::open(path.c_str(), O_WRONLY | O_CREAT | (append ? 0 : O_TRUNC) | O_APPEND | O_CLOEXEC, 0644));
  if (!f.valid()) throw std::system_error(errno, std::generic_category(), "mcirun: cannot write the log " + path);
  return f;
}

}  // namespace

RelaySinks Supervisor::sinks_for(const StreamPlan& plan, int console, bool append) {
  RelaySinks s;
  s.console = plan.console ? console : -1;
  s.prefix = plan.prefix;
  if (!plan.file.empty()) s.file = open_log(plan.file, append);
  if (!plan.filtered_file.empty()) {
    auto it = shared_files_.find(plan.filtered_file);
    if (it == shared_files_.end()) {
      it = shared_files_.emplace(plan.filtered_file, open_log(plan.filtered_file, false)).first;
    }
    s.filtered = it->second.get();
    s.filtered_prefix = plan.filtered_prefix;
    s.filters = plan.filters;
  }
  return s;
}

Supervisor::Proc::Proc(const RankSpec& spec, pid_t p, StreamRelay o, StreamRelay e, int k)
    : rank(spec.rank), local_rank(spec.local_rank), pid(p), out(std::move(o)), err(std::move(e)), replacement(k) {}

void Supervisor::launch(const RankSpec& spec, int replacement) {
  const bool again = replacement > 0;
  RelaySinks out = sinks_for(spec.streams.out, STDOUT_FILENO, again);
  RelaySinks err = sinks_for(spec.streams.err, STDERR_FILENO, again);
  std::vector<std::string> env = again ? replacement_environment(spec.env, replacement) : spec.env;
  // --monitor: the rank's status block, kept open across its exec only.
  const int block = monitor_ ? monitor_->block_for(spec.rank, spec.local_rank, replacement) : -1;
  if (block >= 0) env.push_back(fmt::format("MCI_MONITOR_FD={}", block));
  if (monitor_ && !monitor_->url().empty()) env.push_back("MCI_MONITOR_URL=" + monitor_->url());
  StartedChild c = start_child(job_.program, env, signals_, spec.cpus, block);
  if (guardian_) guardian_->watch_group(c.pid);
  if (monitor_) monitor_->started(spec.rank, c.pid);
  procs_.emplace_back(spec, c.pid, StreamRelay(std::move(c.out), std::move(out), kTailLines),
                      StreamRelay(std::move(c.err), std::move(err), kTailLines), replacement);
}

void Supervisor::start(const std::vector<RankSpec>& ranks) {
  started_at_ = Clock::now();
  procs_.reserve(ranks.size());
  if (replaces()) specs_ = ranks;
  for (const RankSpec& r : ranks) {
    try {
      launch(r, 0);
    } catch (const std::exception& e) {
      start_error_ = fmt::format("rank {} could not start: {}", r.rank, e.what());
      say(fmt::format("mcirun: {}", e.what()));
      if (link_) link_->report_failure(start_error_);
      begin_stop();
      return;
    }
  }
}

bool Supervisor::all_exited() const {
  for (const auto& p : procs_) {
    if (!p.status) return false;
  }
  return true;
}

bool Supervisor::group_alive(const Proc& p) { return ::kill(-p.pid, 0) == 0; }

bool Supervisor::any_group_alive() const {
  for (const auto& p : procs_) {
    if (group_alive(p)) return true;
  }
  return false;
}

void Supervisor::reap() {
  // Collect every exit first and relay what those processes wrote, so their
  // last lines come out before anything mcirun says about them. As a
  // subreaper, mcirun also adopts what the ranks leave behind: those are
  // reaped here too, and say nothing.
  std::vector<Proc*> exited;
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(-1, &st, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == ECHILD) {
      // Nothing left to wait for: a rank without a status was reaped behind
      // our back (cannot happen unless someone else waits); count it failed.
      for (auto& p : procs_) {
        if (!p.status) p.status = 255 << 8;
      }
    }
    if (r <= 0) break;
    for (auto& p : procs_) {
      if (p.pid != r || p.status) continue;
      p.status = st;
      // What it was killed before unlinking (the segment's name is unlinked
      // once every rank of the host mapped it).
      if (const int n = remove_shm_segments_of(p.pid); n > 0) {
        log::info("mcirun: removed {} shared-memory segment(s) rank {} (pid {}) left in /dev/shm", n, p.rank, p.pid);
      }
      p.out.drain(buf_);
      p.err.drain(buf_);
      if (monitor_) {
        using jobview::Process;
        monitor_->exited(p.rank,
                         exited_ok(st) ? Process::done
                         : goes_on()   ? Process::lost
                                       : Process::failed,
                         exited_ok(st) ? "" : describe_exit(st));
      }
      exited.push_back(&p);
    }
  }
  for (Proc* p : exited) on_exit(*p);
  start_replacements();
}

// Under load, a rank that dies can lose the race to its own victims: its
// peers see its sockets close as it exits, fail, and are reaped first. The
// rank that was already exiting when the first failure came is the cause.
Supervisor::Proc* Supervisor::exiting_before(const Proc& failed) {
  for (auto& q : procs_) {
    if (&q == &failed || q.status || !process_exiting(q.pid)) continue;
    q.status = wait_for_exit(q.pid, std::chrono::seconds(2));
    if (!q.status) continue;
    q.out.drain(buf_);
    q.err.drain(buf_);
    if (!exited_ok(*q.status)) return &q;
  }
  return nullptr;
}

void Supervisor::on_exit(Proc& failed) {
  if (phase_ != Phase::running || exited_ok(*failed.status)) return;
  if (goes_on()) return on_loss(failed);
  Proc* cause = exiting_before(failed);
  Proc& p = cause ? *cause : failed;
  first_failure_ = static_cast<std::size_t>(&p - procs_.data());
  const std::string what = describe_exit(*p.status);
  say(fmt::format("mcirun: rank {} (pid {}) failed: {}", p.rank, p.pid, what));
  if (link_) link_->report_failure(fmt::format("rank {} (pid {} on {}) failed: {}", p.rank, p.pid, host_, what));
  begin_stop();
}

void Supervisor::kill_lost_groups() {
  const auto now = Clock::now();
  for (auto& p : procs_) {
    if (!p.group_kill_at || now < *p.group_kill_at) continue;
    p.group_kill_at.reset();
    if (!group_alive(p)) continue;
    ::kill(-p.pid, SIGKILL);
    say(
        fmt::format("mcirun: sent SIGKILL to what rank {} (pid {}) left running in its process group: still there "
                    "{} after SIGTERM",
                    p.rank, p.pid, seconds_text(job_.grace)));
  }
}

std::optional<Clock::time_point> Supervisor::next_wakeup() const {
  std::optional<Clock::time_point> at = killed_ ? std::nullopt : next_step_at_;
  for (const auto& p : procs_) {
    if (p.group_kill_at && (!at || *p.group_kill_at < *at)) at = p.group_kill_at;
  }
  return at;
}

// Signals go to each rank's process group: the rank and whatever it started
// (data loader workers, a shell's children), even after the rank itself is gone.
// After the first step of a stop, each line says which signal the rank outlived.
void Supervisor::signal_groups(int sig) {
  const std::string after =
      last_sent_ != 0 ? fmt::format(" {} after {}", seconds_text(job_.grace), signal_name(last_sent_)) : std::string();
  for (auto& p : procs_) {
    if (!p.status) {
      if (::kill(-p.pid, sig) != 0) ::kill(p.pid, sig);
      wake_to_receive(p, sig);
      p.signal_sent = sig;
      say(fmt::format("mcirun: sent {} to rank {} (pid {}){}", signal_name(sig), p.rank, p.pid,
                      after.empty() ? "" : ": still running" + after));
    } else if (group_alive(p)) {
      ::kill(-p.pid, sig);
      wake_to_receive(p, sig);
      say(fmt::format("mcirun: sent {} to what rank {} (pid {}) left running in its process group{}", signal_name(sig),
                      p.rank, p.pid, after.empty() ? "" : ": still there" + after));
    }
  }
}

// A stopped process (SIGSTOP, a debugger's stop, Ctrl-Z passed on) keeps a
// catchable signal pending until it runs again: SIGCONT after it, so that a
// stop reaches it within the grace period instead of waiting for SIGKILL
// (systemd does the same). SIGKILL needs none.
void Supervisor::wake_to_receive(const Proc& p, int sig) {
  if (sig == SIGKILL || sig == SIGCONT || sig == SIGSTOP || sig == SIGTSTP) return;
  if (::kill(-p.pid, SIGCONT) != 0) ::kill(p.pid, SIGCONT);
}

// What follows the first signal of a stop: after a SIGINT (Ctrl-C), a
// program that has not finished within the grace period gets SIGTERM (what
// a failure sends), then SIGKILL; after any other signal, SIGKILL.
void Supervisor::begin_stop(int first) {
  phase_ = Phase::stopping;
  if (adopter_) adopter_->refuse();
  steps_left_ = first == SIGINT ? std::vector<int>{SIGTERM, SIGKILL} : std::vector<int>{SIGKILL};
  send_step(first);
}

void Supervisor::send_step(int sig) {
  signal_groups(sig);
  last_sent_ = sig;
  if (sig == SIGKILL) {
    killed_ = true;
    steps_left_.clear();
    next_step_at_.reset();
    return;
  }
  next_step_at_ = Clock::now() + job_.grace;
  if (job_.grace.count() == 0) next_step();
}

void Supervisor::next_step() {
  if (steps_left_.empty()) return kill_remaining();
  const int sig = steps_left_.front();
  steps_left_.erase(steps_left_.begin());
  send_step(sig);
}

void Supervisor::kill_remaining() { send_step(SIGKILL); }

void Supervisor::pause_or_resume(int sig) {
  // The ranks lead their own process groups, so a terminal's Ctrl-Z reaches
  // only mcirun: pass it on, then stop for real (SIGSTOP cannot be blocked).
  // SIGCONT wakes mcirun whatever its mask; the queued copy is passed on too.
  for (const auto& p : procs_) {
    if (!p.status || group_alive(p)) ::kill(-p.pid, sig);
  }
  if (sig == SIGTSTP) ::raise(SIGSTOP);
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGCHLD) return reap();
  if (sig == SIGTSTP || sig == SIGCONT) return pause_or_resume(sig);
  if (phase_ == Phase::running) {
    stop_signal_ = sig;
    say(fmt::format("mcirun: received {}: stopping the job (passing {} on to the processes)", signal_name(sig),
                    signal_name(sig)));
    // First to the other nodes, so their processes get it as soon as ours.
    if (link_) link_->report_stop(sig, "host " + host_);
    begin_stop(sig);
  } else if (!killed_) {
    say(fmt::format("mcirun: received {} while stopping: sending SIGKILL now", signal_name(sig)));
    last_sent_ = 0;  // the lines say no "still running N s after ...": the grace did not pass
    kill_remaining();
  }
}

// Why this node's processes stop when its store connection closes: on etcd,
// what this node's relay met (etcd's quorum lost, this node cut off), which
// the closed connection cannot say; otherwise node 0's store is gone.
std::string Supervisor::store_lost_text(const std::string& seen) const {
  if (attempt_.store.replicated) {
    const std::string why = attempt_.store.trouble ? attempt_.store.trouble() : "";
    return fmt::format("this node lost the job's store on etcd: {}", why.empty() ? seen : why);
  }
  return fmt::format("the job's store at {}:{} went away ({})", attempt_.store.host, attempt_.store.port, seen);
}

void Supervisor::on_link_events() {
  for (auto& e : link_->take_events()) {
    switch (e.kind) {
      case NodeLink::EventKind::peer_failed:
      case NodeLink::EventKind::store_lost:
        if (phase_ != Phase::running) break;
        store_lost_ = e.kind == NodeLink::EventKind::store_lost;
        peer_failure_ = e.kind == NodeLink::EventKind::peer_failed ? e.text : store_lost_text(e.text);
        say(fmt::format("mcirun: {}: stopping this node's processes",
                        e.kind == NodeLink::EventKind::peer_failed ? "another node failed, " + e.text : peer_failure_));
        begin_stop();
        break;
      case NodeLink::EventKind::peer_stopped: on_peer_stop(e); break;
      case NodeLink::EventKind::unreachable:
        say(
            fmt::format("mcirun: warning: cannot use the job's store at {}:{} to follow the other nodes "
                        "({}); a failure there will not stop this node",
                        attempt_.store.host, attempt_.store.port, e.text));
        break;
      case NodeLink::EventKind::all_done:
      case NodeLink::EventKind::peer_gone: break;  // only node 0 waits for these, after its own processes
    }
  }
}

// Another node's mcirun was told to stop: this node passes the same signal
// on, so Ctrl-C on any node is a KeyboardInterrupt on every rank.
void Supervisor::on_peer_stop(const NodeLink::Event& e) {
  if (phase_ != Phase::running) return;
  stop_signal_ = e.signal;
  stop_origin_ = e.text;
  say(fmt::format("mcirun: {} received {}: passing it on to this node's processes", e.text, signal_name(e.signal)));
  begin_stop(e.signal);
}

int Supervisor::run() {
  std::vector<pollfd> fds;
  std::vector<StreamRelay*> relays;
  std::optional<Clock::time_point> settle_until;
  while (true) {
    if (all_exited()) {
      if (!any_group_alive()) break;
      // Every rank is gone but its group is not: stop what it left behind
      // the same way (SIGTERM, grace, SIGKILL), so mcirun leaves no orphans.
      if (!next_step_at_ && !killed_) begin_stop_stragglers();
      if (killed_) {
        if (!settle_until) settle_until = Clock::now() + kSettle;
        if (Clock::now() >= *settle_until) break;
      }
    }
    fds.clear();
    relays.clear();
    fds.push_back({signals_.fd(), POLLIN, 0});
    fds.push_back({link_ ? link_->fd() : -1, POLLIN, 0});
    fds.push_back({adopter_ ? adopter_->fd() : -1, POLLIN, 0});
    for (auto& p : procs_) {
      for (StreamRelay* s : {&p.out, &p.err}) {
        if (!s->is_open()) continue;
        fds.push_back({s->fd(), POLLIN, 0});
        relays.push_back(s);
      }
    }
    const int timeout = poll_timeout(killed_ ? settle_until : next_wakeup());
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "mcirun: poll");
    }
    for (std::size_t i = 0; i < relays.size(); ++i) {
      if (fds[i + 3].revents != 0) relays[i]->read_some(buf_);
    }
    if (fds[0].revents != 0) {
      for (int sig : signals_.take()) on_signal(sig);
    }
    if (link_ && fds[1].revents != 0) on_link_events();
    if (adopter_ && fds[2].revents != 0) adopt_nodes();
    if (next_step_at_ && !killed_ && Clock::now() >= *next_step_at_) next_step();
    kill_lost_groups();
  }
  groups_settled_ = true;
  // Waiting for the other nodes now: no node is adopted by this one.
  if (adopter_) adopter_->refuse();
  for (auto& p : procs_) {
    p.out.drain_and_close(buf_);
    p.err.drain_and_close(buf_);
  }

  int rc = exit_code();
  // Under continue, a node that lost every rank is done as well: the other
  // nodes go on, and node 0 keeps their store up until they finish.
  if (link_ && (rc == 0 || (goes_on() && only_losses()))) {
    link_->report_done();
    if (attempt_.store.hosted_here) {
      const int others = wait_for_other_nodes();
      if (others != 0) rc = others;
    }
  }
  if ((rc != 0 || !losses_.empty()) && !procs_.empty()) print_summary();
  return rc;
}

void Supervisor::begin_stop_stragglers() {
  for (auto& p : procs_) {
    if (!group_alive(p)) continue;
    ::kill(-p.pid, SIGTERM);
    say(
        fmt::format("mcirun: rank {} (pid {}) exited but left processes running in its process group: sent "
                    "them SIGTERM",
                    p.rank, p.pid));
  }
  last_sent_ = SIGTERM;
  steps_left_ = {SIGKILL};
  next_step_at_ = Clock::now() + job_.grace;
  if (job_.grace.count() == 0) next_step();
}

int Supervisor::wait_for_other_nodes() {
  const auto start = Clock::now();
  bool noticed = false;
  while (true) {
    const auto now = Clock::now();
    if (now - start >= kOtherNodesLimit) {
      say(
          fmt::format("mcirun: warning: the other nodes did not finish within {} s of this one; "
                      "closing the job's store anyway",
                      kOtherNodesLimit.count()));
      return 0;
    }
    const auto next = noticed ? start + kOtherNodesLimit : start + kOtherNodesNotice;
    pollfd fds[2] = {{signals_.fd(), POLLIN, 0}, {link_->fd(), POLLIN, 0}};
    if (::poll(fds, 2, poll_timeout(next)) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "mcirun: poll");
    }
    if (!noticed && Clock::now() >= start + kOtherNodesNotice) {
      noticed = true;
      const int running = link_->nodes_running();
      say(
          fmt::format("mcirun: this node's processes are done; keeping the job's store up until the "
                      "other {} node(s) finish",
                      running >= 0 ? running : attempt_.nnodes - 1));
    }
    if (fds[0].revents != 0) {
      for (int sig : signals_.take()) {
        if (sig == SIGCHLD || sig == SIGCONT) continue;
        if (sig == SIGTSTP) {
          ::raise(SIGSTOP);
          continue;
        }
        stop_signal_ = sig;
        say(fmt::format("mcirun: received {} while waiting for the other nodes", signal_name(sig)));
        link_->report_stop(sig, "host " + host_);
        return 128 + sig;
      }
    }
    if (fds[1].revents != 0) {
      for (auto& e : link_->take_events()) {
        if (e.kind == NodeLink::EventKind::all_done) return 0;
        if (e.kind == NodeLink::EventKind::peer_gone) {
          say(fmt::format("mcirun: {}: not waiting for it", e.text));
        }
        if (e.kind == NodeLink::EventKind::peer_stopped) {
          stop_signal_ = e.signal;
          stop_origin_ = e.text;
          say(fmt::format("mcirun: {} received {}", e.text, signal_name(e.signal)));
          return 128 + e.signal;
        }
        if (e.kind == NodeLink::EventKind::peer_failed) {
          peer_failure_ = e.text;
          say(fmt::format("mcirun: another node failed, {}", e.text));
          return 1;
        }
        // The store out of reach (on etcd: this node cut off from the
        // quorum): there is nothing left to keep up or wait on.
        if (e.kind == NodeLink::EventKind::store_lost || e.kind == NodeLink::EventKind::unreachable) {
          say(fmt::format("mcirun: lost the job's store while waiting for the other nodes ({}): not waiting", e.text));
          return 0;
        }
      }
    }
  }
}

bool Supervisor::rank_failed() const {
  return start_error_.empty() && !store_lost_ && !stop_signal_ && (first_failure_ || !peer_failure_.empty());
}

std::string Supervisor::failure_line() const {
  if (!first_failure_) return peer_failure_.empty() ? start_error_ : peer_failure_;
  const Proc& p = procs_[*first_failure_];
  std::string line =
      fmt::format("rank {} (pid {} on {}) failed: {}", p.rank, p.pid, host_, p.status ? describe_exit(*p.status) : "?");
  if (attempt_.keeps_error_files()) {
    if (const auto ex = recorded_exception(error_file(attempt_, p.local_rank, p.rank))) {
      line += ": " + ex->substr(0, ex->find('\n'));
    }
  }
  return line;
}

bool Supervisor::only_losses() const {
  return !first_failure_ && start_error_.empty() && peer_failure_.empty() && !store_lost_ && !stop_signal_;
}

int Supervisor::exit_code() const {
  if (first_failure_ || !start_error_.empty() || !peer_failure_.empty()) return 1;
  if (stop_signal_) return 128 + *stop_signal_;
  // Under continue, every survivor exited 0 (a survivor that failed is a
  // loss too): the job succeeded if any rank survived.
  if (losses_.size() == procs_.size() && !procs_.empty()) return 1;
  return 0;
}

void Supervisor::print_summary() const {
  JobReport r;
  r.host = host_;
  r.node_rank = attempt_.node_rank;
  r.first_failure = first_failure_;
  r.stop_signal = stop_signal_;
  r.stop_origin = stop_origin_;
  r.python = job_.program.python;
  r.python_from = job_.program.python_from;
  r.peer_failure = peer_failure_;
  r.store_lost = store_lost_;
  r.start_error = start_error_;
  r.on_rank_loss_continue = goes_on();
  r.replace = replaces();
  r.multi_node = attempt_.nnodes > 1;
  for (std::size_t i : losses_) r.lost.push_back(i);
  for (const auto& p : procs_) {
    RankReport rr;
    rr.rank = p.rank;
    rr.local_rank = p.local_rank;
    rr.pid = p.pid;
    rr.wait_status = p.status;
    rr.signal_sent = p.signal_sent;
    rr.lost_at = p.lost_at;
    rr.replacement = p.replacement;
    rr.replaced_by = p.replaced_by;
    rr.not_replaced = p.not_replaced;
    if (const LineTail* t = p.err.tail()) rr.stderr_tail = t->lines();
    if (const LineTail* t = p.out.tail()) rr.stdout_tail = t->lines();
    if (p.kept) {
      rr.python_exception = p.recorded;  // the file is its replacement's now
    } else if (attempt_.keeps_error_files()) {
      rr.python_exception = recorded_exception(error_file(attempt_, p.local_rank, p.rank));
    }
    r.ranks.push_back(std::move(rr));
  }
  for (const auto& line : summary_lines(r)) say(line);
}

}  // namespace mci::launch
