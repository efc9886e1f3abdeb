#include "launch/config/rank_loss.hpp"

#include <string_view>

#include <fmt/format.h>

#include "launch/config/cli.hpp"

namespace mci::launch {

std::string on_rank_loss_name(OnRankLoss policy) {
  switch (policy) {
    case OnRankLoss::go_on: return "continue";
    case OnRankLoss::replace: return "replace";
    case OnRankLoss::stop: break;
  }
  return "stop";
}

OnRankLoss parse_on_rank_loss(const std::string& named, const std::string& value) {
  if (value == "stop") return OnRankLoss::stop;
  if (value == "continue") return OnRankLoss::go_on;
  if (value == "replace") return OnRankLoss::replace;
  throw UsageError(
      fmt::format("{}='{}' is not valid: use stop (a lost rank stops every process: the default), continue (the other "
                  "ranks go on without it) or replace (the other ranks go on and a new process takes its place)",
                  named, value));
}

std::vector<std::string> replacement_environment(const std::vector<std::string>& lost_env, int k) {
  constexpr std::string_view kName = "MCI_REPLACEMENT=";
  std::vector<std::string> env;
  env.reserve(lost_env.size() + 1);
  for (const auto& kv : lost_env) {
    if (kv.compare(0, kName.size(), kName) != 0) env.push_back(kv);
  }
  env.push_back(fmt::format("{}{}", kName, k));
  return env;
}

}  // namespace mci::launch
