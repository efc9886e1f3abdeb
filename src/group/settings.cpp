#include "group/settings.hpp"

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/env.hpp"
#include "mci/errors.hpp"

namespace mci {

GroupSettings GroupSettings::from(const InitOptions& o) {
  GroupSettings s;
  const long long entries =
      env_int("MCI_FLIGHT_RECORDER_ENTRIES").value_or(static_cast<long long>(o.flight_recorder_entries));
  if (entries < 0 || entries > (1ll << 24)) {
    throw ConfigError(fmt::format("MCI_FLIGHT_RECORDER_ENTRIES={} is out of range: use 0 (off) .. 16777216", entries));
  }
  s.flight_recorder_entries = static_cast<std::size_t>(entries);
  const long long wait = env_int("MCI_HANG_REPORT_WAIT_MS").value_or(3000);
  if (wait < 0)
    throw ConfigError(fmt::format("MCI_HANG_REPORT_WAIT_MS={} is negative: use 0 (no report) or more", wait));
  s.hang_report_wait = std::chrono::milliseconds(wait);
  if (auto dbg = env_str("MCI_DEBUG")) s.debug_timing = dbg->find("timing") != std::string::npos;
  s.launcher_hosts_store = env_str("MCI_STORE_HOSTED").has_value();
  s.host_addr = env_str("MCI_HOST_ADDR").value_or("");
  if (auto clock = env_str("MCI_CLOCK")) {
    if (*clock != "auto" && *clock != "steady") {
      throw ConfigError(
          fmt::format("MCI_CLOCK={} is not a clock mci knows: use auto (the CPU's time-stamp counter "
                      "where it is invariant, else the steady clock) or steady",
                      *clock));
    }
    s.counter_clock = *clock == "auto";
  }
  s.token = o.token.empty() ? auth::token_from_env() : o.token;
  return s;
}

}  // namespace mci
