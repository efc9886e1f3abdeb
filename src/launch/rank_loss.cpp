#include "launch/rank_loss.hpp"

#include <fmt/format.h>

#include "launch/cli.hpp"

namespace mci::launch {

std::string on_rank_loss_name(OnRankLoss policy) { return policy == OnRankLoss::go_on ? "continue" : "stop"; }

OnRankLoss parse_on_rank_loss(const std::string& named, const std::string& value) {
  if (value == "stop") return OnRankLoss::stop;
  if (value == "continue") return OnRankLoss::go_on;
  if (value == "replace") {
    throw UsageError(
        fmt::format("{}=replace is not built yet: use continue (the survivors go on, see docs/fault-tolerance.md) or "
                    "--max-restarts",
                    named));
  }
  throw UsageError(fmt::format(
      "{}='{}' is not valid: use stop (a lost rank stops every process: the default) or continue (the other "
      "ranks go on without it)",
      named, value));
}

}  // namespace mci::launch
