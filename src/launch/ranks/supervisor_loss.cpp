// What the supervisor does when a rank is lost under --on-rank-loss=continue
// or replace (supervisor.hpp): the others go on; under replace a new process
// takes the lost one's place, as long as the node's cap allows.
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "launch/output/error_files.hpp"
#include "launch/ranks/child_env.hpp"
#include "launch/ranks/supervisor.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

std::string Supervisor::others_go_on() const {
  int running = 0;
  for (const auto& q : procs_) running += q.status ? 0 : 1;
  return running == 0
             ? std::string("no other rank of this node is still running")
             : fmt::format("the {} other rank(s){} go on", running, attempt_.nnodes > 1 ? " of this node" : "");
}

void Supervisor::say_lost(const Proc& p, const std::string& what) const {
  say(fmt::format("mcirun: rank {} (pid {} on {}{}) was lost at {:.1f} s ({}); --on-rank-loss={}: {}", p.rank, p.pid,
                  host_, p.replacement > 0 ? fmt::format(", replacement {}", p.replacement) : "",
                  static_cast<double>(p.lost_at->count()) / 1000, describe_exit(*p.status),
                  on_rank_loss_name(job_.on_rank_loss), what));
}

// The cap stops a rank that dies at every start from being started forever;
// it counts this node's replacements, whichever ranks they replaced.
std::string Supervisor::replacement_refused() const {
  if (phase_ != Phase::running) return "the job is stopping";
  // A replacement joins the ranks still running: in a job of one node,
  // when none is left, it would only wait out its join timeout.
  if (attempt_.nnodes == 1 && std::none_of(procs_.begin(), procs_.end(), [](const Proc& q) { return !q.status; })) {
    return "no rank of the job is still running for it to join";
  }
  if (replacements_ + static_cast<int>(pending_.size()) < job_.max_replacements) return {};
  return fmt::format("the cap of {} replacement(s) on this node is reached (--max-restarts={}{})",
                     job_.max_replacements, job_.max_replacements,
                     job_.max_replacements_given ? "" : ", the default with replace; give --max-restarts=N for more");
}

void Supervisor::on_loss(Proc& p) {
  p.lost_at = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_at_);
  const std::size_t index = static_cast<std::size_t>(&p - procs_.data());
  losses_.push_back(index);
  if (replaces()) {
    p.not_replaced = replacement_refused();
    if (p.not_replaced.empty()) {
      // Its line names the new pid: said once the replacement has started.
      pending_.push_back(index);
      tell_adopter_room();
      return;
    }
    say_lost(p, fmt::format("not replaced: {}; as with continue, {}", p.not_replaced, others_go_on()));
  } else {
    say_lost(p, others_go_on());
  }
  end_lost_group(p);
}

void Supervisor::keep_error_file(Proc& p, int k) {
  p.kept = true;
  if (!attempt_.keeps_error_files()) return;
  const std::string path = error_file(attempt_, p.local_rank, p.rank);
  p.recorded = recorded_exception(path);
  // Kept beside it (the log folder is the user's), out of the way of an
  // exception the replacement records.
  std::rename(path.c_str(), fmt::format("{}.before-replacement-{}", path, k).c_str());
}

void Supervisor::start_replacements() {
  std::vector<std::size_t> pending;
  pending.swap(pending_);
  for (std::size_t i : pending) {
    const int k = replacements_ + 1;
    std::string what;
    keep_error_file(procs_[i], k);
    try {
      // By rank: an adopted node's ranks are here too (adopt_nodes).
      const int rank = procs_[i].rank;
      const auto spec = std::find_if(specs_.begin(), specs_.end(), [&](const RankSpec& s) { return s.rank == rank; });
      if (spec == specs_.end()) throw Error(fmt::format("mcirun: no start recorded for rank {}", rank));
      launch(*spec, k);
      ++replacements_;
      procs_[i].replaced_by = procs_.size() - 1;
      what = fmt::format("started pid {} in its place (replacement {})", procs_.back().pid, k);
    } catch (const std::exception& e) {
      procs_[i].not_replaced = fmt::format("its replacement could not start: {}", e.what());
      what = fmt::format("{}; as with continue, {}", procs_[i].not_replaced, others_go_on());
    }
    say_lost(procs_[i], what);
    end_lost_group(procs_[i]);
  }
  tell_adopter_room();
}

void Supervisor::adopt_with(NodeAdopter* adopter, AdoptedSpecs specs) {
  adopter_ = adopter;
  adopted_specs_ = std::move(specs);
  tell_adopter_room();
}

void Supervisor::tell_adopter_room() {
  if (!adopter_) return;
  adopter_->set_room(std::max(0, job_.max_replacements - replacements_ - static_cast<int>(pending_.size())));
}

void Supervisor::adopt_nodes() {
  for (const int node : adopter_->take()) {
    int first_local = 0;
    for (const auto& s : specs_) first_local = std::max(first_local, s.local_rank + 1);
    std::vector<RankSpec> ranks;
    try {
      ranks = adopted_specs_(node, first_local);
    } catch (const std::exception& e) {
      say(fmt::format("mcirun: node {}'s mcirun is gone, and this node cannot start its ranks again: {}", node,
                      e.what()));
      continue;
    }
    std::string what;
    for (const RankSpec& spec : ranks) {
      const std::string sep = what.empty() ? "" : "; ";
      if (const std::string refused = replacement_refused(); !refused.empty()) {
        what += fmt::format("{}rank {} not started: {}", sep, spec.rank, refused);
        continue;
      }
      const int k = replacements_ + 1;
      try {
        launch(spec, k);
        ++replacements_;
        specs_.push_back(spec);
        what += fmt::format("{}rank {} as pid {} (replacement {})", sep, spec.rank, procs_.back().pid, k);
      } catch (const std::exception& e) {
        what += fmt::format("{}rank {} could not start: {}", sep, spec.rank, e.what());
      }
    }
    say(
        fmt::format("mcirun: node {}'s mcirun is gone (its host lost, or mcirun killed with its ranks); "
                    "--on-rank-loss=replace: this node (node {} on {}) starts its {} rank(s) again: {}",
                    node, attempt_.node_rank, host_, ranks.size(), what));
  }
  tell_adopter_room();
}

// What the rank started (data loader workers, a shell's children) dies
// with it, as when a loss stops the job: SIGTERM now, SIGKILL after --grace.
void Supervisor::end_lost_group(Proc& p) {
  if (!group_alive(p)) return;
  ::kill(-p.pid, SIGTERM);
  wake_to_receive(p, SIGTERM);
  say(fmt::format("mcirun: sent SIGTERM to what rank {} (pid {}) left running in its process group", p.rank, p.pid));
  p.group_kill_at = std::chrono::steady_clock::now() + job_.grace;
  if (job_.grace.count() == 0) kill_lost_groups();
}

}  // namespace mci::launch
