#include "group/settings.hpp"

#include <signal.h>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "transport/mesh.hpp"

namespace mci {

Settings resolve_group_settings(const InitOptions& o, const SettingSource& source, SettingUses uses) {
  // InitOptions' typed field is the default of its variable (set or given),
  // checked by the same row.
  const FieldDefault fields[] = {
      {"MCI_FLIGHT_RECORDER_ENTRIES", "InitOptions::flight_recorder_entries", o.flight_recorder_entries}};
  return Settings::resolve(source, uses, transport::transport_choices(), fields);
}

std::string job_token(const InitOptions& o, const Settings& s) {
  return o.token.empty() ? s.text("MCI_JOB_TOKEN") : o.token;
}

FrDumpPlace fr_dump_place(const Settings& s, const SettingSource& source) {
  FrDumpPlace p;
  // torch users already set torch's variable for their NCCL groups' dumps;
  // mci's own wins (it keeps mci's files apart when both would write
  // <prefix><rank>).
  if (const std::string dir = s.text("MCI_FR_DUMP_DIR"); !dir.empty()) {
    p.prefix = dir + (dir.back() == '/' ? "" : "/") + "mci_trace_rank_";
  } else if (auto torch = source.foreign("TORCH_FR_DUMP_TEMP_FILE"); torch && !torch->empty()) {
    p.prefix = *torch;
  }
  if (!s.is({"MCI_FR_DUMP_ON_SIGNAL", "off"})) {
    const std::string& sig = s.choice("MCI_FR_DUMP_ON_SIGNAL");
    p.signal = s.is({"MCI_FR_DUMP_ON_SIGNAL", "SIGUSR1"}) ? SIGUSR1 : SIGUSR2;
    if (p.prefix.empty()) {
      throw ConfigError(fmt::format(
          "MCI_FR_DUMP_ON_SIGNAL={} needs a place to write the flight recorder: set MCI_FR_DUMP_DIR (a folder) or "
          "TORCH_FR_DUMP_TEMP_FILE (a file prefix, as for torch)",
          sig));
    }
  }
  return p;
}

}  // namespace mci
