#include "launch/output/summary.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "launch/ranks/signals.hpp"

namespace mci::launch {

std::string describe_exit(int st) {
  if (WIFEXITED(st)) return fmt::format("exit code {}", WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    return fmt::format("signal {}{}", signal_name(WTERMSIG(st)), WCOREDUMP(st) ? " (core dumped)" : "");
  }
  return fmt::format("wait status {:#x}", st);
}

bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

namespace {

// Cuts what mci's hang report printed (the rank printed it just above: name
// it, do not repeat it) and trailing blank lines. Returns whether it cut a
// hang report.
bool trim_tail(std::vector<std::string>& tail) {
  bool hang_report = false;
  for (std::size_t i = 0; i < tail.size(); ++i) {
    if (tail[i].find("mci hang report for ") != std::string::npos) {
      tail.resize(i);
      hang_report = true;
      break;
    }
  }
  while (!tail.empty() && tail.back().find_first_not_of(" \t\r") == std::string::npos) tail.pop_back();
  return hang_report;
}

// "torch" from "ModuleNotFoundError: No module named 'torch'" (Python 3's
// wording; ImportError's too), or nullopt when no line says so.
std::optional<std::string> missing_module(const std::vector<const std::vector<std::string>*>& texts) {
  constexpr std::string_view kNoModule = "No module named ";
  for (const auto* lines : texts) {
    for (auto it = lines->rbegin(); it != lines->rend(); ++it) {
      const auto at = it->find(kNoModule);
      if (at == std::string::npos) continue;
      std::string name = it->substr(at + kNoModule.size());
      while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
      if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"') && name.back() == name.front()) {
        name = name.substr(1, name.size() - 2);
      }
      return name;
    }
  }
  return std::nullopt;
}

// Whether a line shows torch refusing backend "mci" because mci_torch was
// never imported (torch 1.13: "Invalid backend: 'mci'"; 2.x: "Unknown
// backend type mci").
bool mci_backend_unknown(const std::vector<const std::vector<std::string>*>& texts) {
  for (const auto* lines : texts) {
    for (const auto& l : *lines) {
      if (l.find("Invalid backend: 'mci'") != std::string::npos ||
          l.find("Unknown backend type mci") != std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// Why rank f failed: its last stderr lines (stdout's when stderr was
// empty), the exception it recorded, and for Python what the text shows.
void explain(const JobReport& job, const RankReport& f, std::vector<std::string>& out) {
  // A replacement shares its rank with the process it replaced: the lines say which one.
  const std::string name = f.replacement > 0 ? fmt::format("rank {} (replacement {})", f.rank, f.replacement)
                                             : fmt::format("rank {}", f.rank);
  std::vector<std::string> err = f.stderr_tail;
  std::vector<std::string> std_out = f.stdout_tail;
  bool hang_report = trim_tail(err);
  if (err.empty()) {
    // A program that prints its traceback to stdout (or logs there) said
    // why it failed on stdout: quote that rather than "nothing".
    hang_report = trim_tail(std_out) || hang_report;
    if (std_out.empty()) {
      out.push_back(fmt::format("mcirun: {} wrote nothing on stderr or stdout", name));
    } else {
      out.push_back(fmt::format("mcirun: last {} line(s) of {}'s stdout:", std_out.size(), name));
      for (const auto& l : std_out) out.push_back("mcirun: | " + l);
    }
  } else {
    out.push_back(fmt::format("mcirun: last {} line(s) of {}'s stderr:", err.size(), name));
    for (const auto& l : err) out.push_back("mcirun: | " + l);
  }
  if (hang_report) out.push_back(fmt::format("mcirun: {}'s hang report is above, in its output", name));
  if (f.python_exception) {
    out.push_back(fmt::format("mcirun: {} raised (from its TORCHELASTIC_ERROR_FILE):", name));
    std::size_t start = 0;
    while (start <= f.python_exception->size()) {
      auto nl = f.python_exception->find('\n', start);
      if (nl == std::string::npos) nl = f.python_exception->size();
      out.push_back("mcirun: | " + f.python_exception->substr(start, nl - start));
      start = nl + 1;
    }
  }
  if (!job.python.empty()) {
    const std::vector<std::string> raised =
        f.python_exception ? split_lines(*f.python_exception) : std::vector<std::string>{};
    if (const auto module = missing_module({&f.stderr_tail, &f.stdout_tail, &raised})) {
      out.push_back(
          fmt::format("mcirun: {} ran under the Python interpreter {} ({}), which cannot import "
                      "'{}'",
                      name, job.python,
                      job.python_from == "MCI_PYTHON"    ? "chosen by MCI_PYTHON"
                      : job.python_from == "PYTHON_EXEC" ? "chosen by PYTHON_EXEC"
                      : job.python_from == "PATH"        ? "python3 found on PATH"
                                                         : "named on the command line",
                      *module));
      out.push_back(
          "mcirun: to run it under another one, set MCI_PYTHON=/path/to/python (for a PROGRAM ending "
          "in .py), or name the interpreter before the script: mcirun [OPTIONS] /path/to/python "
          "script.py; or install the module for this one");
    }
    if (mci_backend_unknown({&f.stderr_tail, &f.stdout_tail, &raised})) {
      out.push_back(
          fmt::format("mcirun: {} asked torch for backend \"mci\" before importing mci_torch, "
                      "which registers it: add `import mci_torch` before init_process_group",
                      name));
    }
  }
}

std::string rank_list(const JobReport& job, const std::vector<std::size_t>& which) {
  std::string text;
  for (std::size_t i : which) text += fmt::format("{}{}", text.empty() ? "" : ", ", job.ranks.at(i).rank);
  return text;
}

// "rank 1 (pid 42 on node7, replacement 1)": which process, as the loss
// lines name it (a replacement shares its rank with the process it replaced).
std::string who(const JobReport& job, const RankReport& r) {
  return fmt::format("rank {} (pid {} on {}{})", r.rank, r.pid, job.host,
                     r.replacement > 0 ? fmt::format(", replacement {}", r.replacement) : "");
}

// Under replace: what became of a lost process's place.
std::string its_place(const JobReport& job, const RankReport& r) {
  if (!job.replace) return {};
  if (r.replaced_by) {
    const RankReport& n = job.ranks.at(*r.replaced_by);
    return fmt::format("; replaced by pid {} (replacement {})", n.pid, n.replacement);
  }
  return r.not_replaced.empty() ? std::string() : "; not replaced: " + r.not_replaced;
}

// The ranks of `which`, by rank; under replace, a replacement says so.
std::string survivor_list(const JobReport& job, std::vector<std::size_t> which) {
  std::stable_sort(which.begin(), which.end(),
                   [&](std::size_t a, std::size_t b) { return job.ranks.at(a).rank < job.ranks.at(b).rank; });
  std::string text;
  for (std::size_t i : which) {
    const RankReport& r = job.ranks.at(i);
    text += fmt::format("{}{}{}", text.empty() ? "" : ", ", r.rank,
                        r.replacement > 0 ? fmt::format(" (replacement {})", r.replacement) : "");
  }
  return text;
}

// --on-rank-loss=continue or replace: each lost rank, why, and what became
// of the others.
void explain_losses(const JobReport& job, bool only_losses, std::vector<std::string>& out) {
  const std::string node = fmt::format("node {} (host {})", job.node_rank, job.host);
  if (!job.lost.empty()) {
    out.push_back(job.replace
                      ? fmt::format("mcirun: {} process(es) lost on {}, --on-rank-loss=replace:", job.lost.size(), node)
                      : fmt::format("mcirun: {} rank(s) lost on {}, --on-rank-loss=continue:", job.lost.size(), node));
    for (std::size_t i : job.lost) {
      const RankReport& r = job.ranks.at(i);
      out.push_back(fmt::format("mcirun:   {}: {}, lost at {:.1f} s{}", who(job, r),
                                r.wait_status ? describe_exit(*r.wait_status) : "an unknown status",
                                r.lost_at ? static_cast<double>(r.lost_at->count()) / 1000 : 0.0, its_place(job, r)));
    }
    for (std::size_t i : job.lost) explain(job, job.ranks.at(i), out);
  }
  if (!only_losses) return;
  std::vector<std::size_t> survivors;
  std::size_t replacements = 0;
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    if (!job.ranks[i].lost_at) survivors.push_back(i);
    if (job.ranks[i].replacement > 0) ++replacements;
  }
  const std::string policy = job.replace ? "replace" : "continue";
  if (survivors.empty()) {
    out.push_back(job.multi_node
                      ? fmt::format("mcirun: every {} of {} was lost: this node failed (the other nodes' ranks "
                                    "were not stopped, and their mcirun says how they ended)",
                                    job.replace ? "process" : "rank", node)
                      : fmt::format("mcirun: job failed: every {} was lost; --on-rank-loss={} goes on only while "
                                    "one is left",
                                    job.replace ? "rank and replacement" : "rank", policy));
  } else if (job.replace) {
    out.push_back(fmt::format(
        "mcirun: {} went on with {} replacement(s) for {} lost process(es): its {} process(es) still running at the "
        "end (rank(s) {}) exited 0",
        job.multi_node ? node : "the job", replacements, job.lost.size(), survivors.size(),
        survivor_list(job, survivors)));
  } else {
    out.push_back(fmt::format("mcirun: {} went on without {} lost rank(s): its {} survivor(s) (rank(s) {}) exited 0",
                              job.multi_node ? node : "the job", job.lost.size(), survivors.size(),
                              rank_list(job, survivors)));
  }
}

}  // namespace

std::vector<std::string> summary_lines(const JobReport& job) {
  std::vector<std::string> out;
  const std::string rule(60, '=');
  out.push_back("mcirun: " + rule);
  if (job.first_failure) {
    const RankReport& f = job.ranks.at(*job.first_failure);
    out.push_back(
        fmt::format("mcirun: job failed: rank {} (local rank {}, node {}, host {}, pid {}) "
                    "ended with {}",
                    f.rank, f.local_rank, job.node_rank, job.host, f.pid,
                    f.wait_status ? describe_exit(*f.wait_status) : "an unknown status"));
  } else if (!job.start_error.empty()) {
    out.push_back(fmt::format("mcirun: job failed on node {} (host {}): {}", job.node_rank, job.host, job.start_error));
  } else if (!job.peer_failure.empty()) {
    out.push_back(fmt::format("mcirun: job failed{}: {}", job.store_lost ? "" : " on another node", job.peer_failure));
  } else if (job.stop_signal && !job.stop_origin.empty()) {
    out.push_back(fmt::format("mcirun: job stopped by {} sent to mcirun on {}; node {} (host {}) passed it on",
                              signal_name(*job.stop_signal), job.stop_origin, job.node_rank, job.host));
  } else if (job.stop_signal) {
    out.push_back(fmt::format("mcirun: job stopped by {} sent to mcirun (node {}, host {})",
                              signal_name(*job.stop_signal), job.node_rank, job.host));
  }
  // Under continue, a job that ended with nothing but losses: the survivors' line says how the others ended.
  const bool only_losses = job.on_rank_loss_continue && !job.first_failure && job.start_error.empty() &&
                           job.peer_failure.empty() && !job.stop_signal;
  for (std::size_t i = 0; i < job.ranks.size() && !only_losses; ++i) {
    if (job.first_failure && i == *job.first_failure) continue;
    const RankReport& r = job.ranks[i];
    if (r.lost_at) continue;  // listed with the losses below
    std::string how = r.wait_status ? describe_exit(*r.wait_status) : "still running";
    if (r.signal_sent != 0 && r.wait_status) {
      how += WIFSIGNALED(*r.wait_status) && WTERMSIG(*r.wait_status) == r.signal_sent
                 ? " (sent by mcirun)"
                 : fmt::format(" (after mcirun sent {})", signal_name(r.signal_sent));
    }
    out.push_back(fmt::format("mcirun:   rank {} (pid {}{}): {}", r.rank, r.pid,
                              r.replacement > 0 ? fmt::format(", replacement {}", r.replacement) : "", how));
  }
  if (job.on_rank_loss_continue) explain_losses(job, only_losses, out);
  if (job.first_failure) explain(job, job.ranks.at(*job.first_failure), out);
  out.push_back("mcirun: " + rule);
  return out;
}

}  // namespace mci::launch
