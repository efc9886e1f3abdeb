// mcirun --on-rank-loss: what a rank's loss (a non-zero exit, a signal)
// does to the job. stop is torchrun's answer (every process stops, and
// --max-restarts starts them all again); continue lets the other ranks go
// on, for a program that shrinks its group in place; replace goes on too
// and starts a new process in the lost rank's place, for a program that
// lets it join the running group (docs/fault-tolerance.md).
#pragma once

#include <string>
#include <vector>

namespace mci::launch {

enum class OnRankLoss {
  stop,     // the first loss stops every process on every node
  go_on,    // --on-rank-loss=continue: the others go on
  replace,  // the others go on, and a new process takes the lost one's place
};

// Under replace, how many replacements each node starts when --max-restarts
// does not say: a rank that dies at every start must not be restarted forever.
inline constexpr int kDefaultMaxReplacements = 3;

// "stop", "continue" or "replace": the flag's value, MCI_ON_RANK_LOSS for
// the ranks, and what the nodes of a job compare.
std::string on_rank_loss_name(OnRankLoss policy);

// The flag's value as given; named: how messages name the option
// ("--on-rank-loss"). Throws UsageError for any other word, saying which
// ones are accepted.
OnRankLoss parse_on_rank_loss(const std::string& named, const std::string& value);

// The environment ("NAME=value" strings) of replacement k (1, 2, ...): the
// lost process's own, with MCI_REPLACEMENT=k, so the program knows to join
// the running group rather than form a new one.
std::vector<std::string> replacement_environment(const std::vector<std::string>& lost_env, int k);

}  // namespace mci::launch
