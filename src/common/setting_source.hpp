// Where a group's settings come from: values given by the program
// (InitOptions::settings, the C interface's, mci-perf's flags) first, then
// the environment. Every read goes through the setting's row of the table
// (common/settings_table.hpp), which checks the value and words the error,
// so each reader says what it needs in one line and tests feed any values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/env_lookup.hpp"
#include "common/settings_table.hpp"

namespace mci {

class SettingSource {
 public:
  // Throws ConfigError for a given name that is not a setting, one read
  // only from the environment (MCI_LOG_LEVEL), or a value on several lines.
  SettingSource(std::map<std::string, std::string> given, EnvLookup env);
  // The process environment alone.
  static SettingSource environment();

  // The value as set (given, else the environment); nullopt when unset.
  std::optional<std::string> raw(std::string_view name) const;
  // Whether the value is set and differs from the default ("auto" is not a
  // choice made).
  bool chosen(std::string_view name) const;
  // Checked against the row, the default when unset or empty; ConfigError
  // naming the variable, the value and what it accepts otherwise.
  long long integer(std::string_view name) const;
  std::string choice(std::string_view name) const;
  std::string text(std::string_view name) const;
  bool flag(std::string_view name) const;
  // A variable that is not mci's but that mci honours too (torch's
  // TORCH_FR_DUMP_TEMP_FILE), from the environment only; nullopt when unset.
  std::optional<std::string> foreign(const std::string& name) const { return env_(name); }

  // "MCI_ALGO=auto MCI_TRANSPORT=shm ..." for the rows the ranks must agree
  // on that a backend with these uses honours: what init compares.
  std::string agreed_part(bool mci_algorithms, bool mci_transports) const;
  // Their names, "MCI_ALGO, ... and MCI_CONNECT", for the message.
  static std::string agreed_names(bool mci_algorithms, bool mci_transports);

 private:
  const SettingRow& row(std::string_view name, SettingKind kind) const;
  std::map<std::string, std::string, std::less<>> given_;
  EnvLookup env_;
};

}  // namespace mci
