#include "group/settings.hpp"

#include <signal.h>

#include <fmt/format.h>

#include "common/settings.hpp"
#include "mci/errors.hpp"

namespace mci {

GroupSettings GroupSettings::from(const InitOptions& o, const SettingSource& source) {
  GroupSettings s;
  // The group's own rows (every backend's); InitOptions' typed field is the
  // default of its variable (set or given), checked by the same row.
  const FieldDefault fields[] = {
      {"MCI_FLIGHT_RECORDER_ENTRIES", "InitOptions::flight_recorder_entries", o.flight_recorder_entries}};
  const Settings g = Settings::resolve(source, SettingUses{}, {}, fields);
  s.flight_recorder_entries = static_cast<std::size_t>(g.integer("MCI_FLIGHT_RECORDER_ENTRIES"));
  s.hang_report_wait = std::chrono::milliseconds(g.integer("MCI_HANG_REPORT_WAIT_MS"));
  s.debug_timing = g.text("MCI_DEBUG").find("timing") != std::string::npos;
  s.launcher_hosts_store = g.flag("MCI_STORE_HOSTED");
  s.host_addr = g.text("MCI_HOST_ADDR");
  s.counter_clock = g.choice("MCI_CLOCK") == "auto";
  s.token = o.token.empty() ? g.text("MCI_JOB_TOKEN") : o.token;
  // torch users already set torch's variable for their NCCL groups' dumps;
  // mci's own wins (it keeps mci's files apart when both would write
  // <prefix><rank>).
  if (const std::string dir = g.text("MCI_FR_DUMP_DIR"); !dir.empty()) {
    s.fr_dump_prefix = dir + (dir.back() == '/' ? "" : "/") + "mci_trace_rank_";
  } else if (auto torch = source.foreign("TORCH_FR_DUMP_TEMP_FILE"); torch && !torch->empty()) {
    s.fr_dump_prefix = *torch;
  }
  if (const std::string sig = g.choice("MCI_FR_DUMP_ON_SIGNAL"); sig != "off") {
    s.fr_dump_signal = sig == "SIGUSR1" ? SIGUSR1 : SIGUSR2;
    if (s.fr_dump_prefix.empty()) {
      throw ConfigError(fmt::format(
          "MCI_FR_DUMP_ON_SIGNAL={} needs a place to write the flight recorder: set MCI_FR_DUMP_DIR (a folder) or "
          "TORCH_FR_DUMP_TEMP_FILE (a file prefix, as for torch)",
          sig));
    }
  }
  return s;
}

}  // namespace mci
