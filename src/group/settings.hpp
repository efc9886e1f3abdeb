// The group's settings, read once at init from InitOptions and the setting
// source (the program's values, then the environment) and passed down;
// nothing below the group reads these variables.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/setting_source.hpp"
#include "mci/init.hpp"

namespace mci {

struct GroupSettings {
  std::size_t flight_recorder_entries = 2048;        // MCI_FLIGHT_RECORDER_ENTRIES, else InitOptions
  std::chrono::milliseconds hang_report_wait{3000};  // MCI_HANG_REPORT_WAIT_MS
  bool debug_timing = false;                         // MCI_DEBUG contains "timing"
  bool launcher_hosts_store = false;                 // MCI_STORE_HOSTED: mcirun hosts the store, rank 0 must not
  std::string host_addr;                             // MCI_HOST_ADDR: the address peers reach this rank at
  std::string token;                                 // InitOptions::token, else MCI_JOB_TOKEN
  bool counter_clock = true;                         // MCI_CLOCK: auto (the CPU's counter where usable) or steady
  // Where the flight recorder is written in torch's format on a timeout (a
  // file is this + the job rank): MCI_FR_DUMP_DIR/mci_trace_rank_, else
  // TORCH_FR_DUMP_TEMP_FILE; "" for nowhere.
  std::string fr_dump_prefix;
  int fr_dump_signal = 0;  // MCI_FR_DUMP_ON_SIGNAL: SIGUSR1, SIGUSR2, or 0 for none

  // Throws ConfigError naming a malformed variable.
  static GroupSettings from(const InitOptions& o, const SettingSource& source);
};

}  // namespace mci
