// mcirun --on-rank-loss: what a rank's loss (a non-zero exit, a signal)
// does to the job. stop is torchrun's answer (every process stops, and
// --max-restarts starts them all again); continue lets the other ranks go
// on, for a program that shrinks its group in place (docs/fault-tolerance.md).
#pragma once

#include <string>

namespace mci::launch {

enum class OnRankLoss {
  stop,   // the first loss stops every process on every node
  go_on,  // --on-rank-loss=continue: the others go on
};

// "stop" or "continue": the flag's value, MCI_ON_RANK_LOSS for the ranks,
// and what the nodes of a job compare.
std::string on_rank_loss_name(OnRankLoss policy);

// The flag's value as given; named: how messages name the option
// ("--on-rank-loss"). Throws UsageError for replace (not built yet) and for
// any other word, saying which ones are accepted.
OnRankLoss parse_on_rank_loss(const std::string& named, const std::string& value);

}  // namespace mci::launch
