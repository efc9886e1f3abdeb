// The group's settings: one typed snapshot (common/settings.hpp), resolved
// at init from InitOptions and the setting source (the program's values,
// then the environment). Init, the front end and the backend read their
// rows from it by name, so a group setting costs its row and its reader;
// only what several sources decide together is computed here. Nothing
// below the group reads these variables.
#pragma once

#include <string>

#include "common/setting_source.hpp"
#include "common/settings.hpp"
#include "mci/init.hpp"

namespace mci {

// The group's own rows and those its backend honours (`uses`), with
// InitOptions' typed fields as their rows' defaults. Throws ConfigError
// naming a malformed variable or field.
Settings resolve_group_settings(const InitOptions& o, const SettingSource& source, SettingUses uses = {});

// InitOptions::token, else MCI_JOB_TOKEN.
std::string job_token(const InitOptions& o, const Settings& s);

// Where the flight recorder is written in torch's format on a timeout or a
// signal (a file is `prefix` + the job rank): MCI_FR_DUMP_DIR/mci_trace_rank_,
// else TORCH_FR_DUMP_TEMP_FILE; "" for nowhere. `signal`: SIGUSR1, SIGUSR2
// (MCI_FR_DUMP_ON_SIGNAL) or 0. Throws ConfigError for a signal with no
// place to write.
struct FrDumpPlace {
  std::string prefix;
  int signal = 0;
};
FrDumpPlace fr_dump_place(const Settings& s, const SettingSource& source);

}  // namespace mci
