#include "launch/summary.hpp"

#include <sys/wait.h>

#include <fmt/format.h>

#include "launch/signals.hpp"

namespace mci::launch {

std::string describe_exit(int st) {
  if (WIFEXITED(st)) return fmt::format("exit code {}", WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    return fmt::format("signal {}{}", signal_name(WTERMSIG(st)), WCOREDUMP(st) ? " (core dumped)" : "");
  }
  return fmt::format("wait status {:#x}", st);
}

bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

std::vector<std::string> summary_lines(const JobReport& job) {
  std::vector<std::string> out;
  const std::string rule(60, '=');
  out.push_back("mcirun: " + rule);
  if (job.first_failure) {
    const RankReport& f = job.ranks.at(*job.first_failure);
    out.push_back(fmt::format("mcirun: job failed: rank {} (local rank {}, node {}, host {}, pid {}) "
                              "ended with {}",
                              f.rank, f.local_rank, job.node_rank, job.host, f.pid,
                              f.wait_status ? describe_exit(*f.wait_status) : "an unknown status"));
  } else if (!job.start_error.empty()) {
    out.push_back(fmt::format("mcirun: job failed on node {} (host {}): {}", job.node_rank, job.host,
                              job.start_error));
  } else if (!job.peer_failure.empty()) {
    out.push_back(fmt::format("mcirun: job failed on another node: {}", job.peer_failure));
  } else if (job.stop_signal) {
    out.push_back(fmt::format("mcirun: job stopped by {} sent to mcirun (node {}, host {})",
                              signal_name(*job.stop_signal), job.node_rank, job.host));
  }
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    if (job.first_failure && i == *job.first_failure) continue;
    const RankReport& r = job.ranks[i];
    std::string how = r.wait_status ? describe_exit(*r.wait_status) : "still running";
    if (r.signal_sent != 0 && r.wait_status) {
      how += WIFSIGNALED(*r.wait_status) && WTERMSIG(*r.wait_status) == r.signal_sent
                 ? " (sent by mcirun)"
                 : fmt::format(" (after mcirun sent {})", signal_name(r.signal_sent));
    }
    out.push_back(fmt::format("mcirun:   rank {} (pid {}): {}", r.rank, r.pid, how));
  }
  if (job.first_failure) {
    const RankReport& f = job.ranks.at(*job.first_failure);
    std::vector<std::string> tail = f.stderr_tail;
    // The rank printed mci's hang report just above: name it, do not repeat it.
    bool hang_report = false;
    for (std::size_t i = 0; i < tail.size(); ++i) {
      if (tail[i].find("mci hang report for ") != std::string::npos) {
        tail.resize(i);
        hang_report = true;
        break;
      }
    }
    while (!tail.empty() && tail.back().find_first_not_of(" \t\r") == std::string::npos) tail.pop_back();
    if (tail.empty()) {
      out.push_back(fmt::format("mcirun: rank {} wrote nothing on stderr", f.rank));
    } else {
      out.push_back(fmt::format("mcirun: last {} line(s) of rank {}'s stderr:", tail.size(), f.rank));
      for (const auto& l : tail) out.push_back("mcirun: | " + l);
    }
    if (hang_report) out.push_back(fmt::format("mcirun: rank {}'s hang report is above, in its output", f.rank));
    if (f.python_exception) {
      out.push_back(fmt::format("mcirun: rank {} raised (from its TORCHELASTIC_ERROR_FILE):", f.rank));
      std::size_t start = 0;
      while (start <= f.python_exception->size()) {
        auto nl = f.python_exception->find('\n', start);
        if (nl == std::string::npos) nl = f.python_exception->size();
        out.push_back("mcirun: | " + f.python_exception->substr(start, nl - start));
        start = nl + 1;
      }
    }
  }
  out.push_back("mcirun: " + rule);
  return out;
}

}  // namespace mci::launch
