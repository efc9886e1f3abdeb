// Where a group's settings come from: values given by the program
// (InitOptions::settings, the C interface's, mci-perf's flags) first, then
// the environment. Settings::resolve (common/settings.hpp) reads each row
// from here once and checks it; tests feed any values.
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
  // A variable that is not mci's but that mci honours too (torch's
  // TORCH_FR_DUMP_TEMP_FILE), from the environment only; nullopt when unset.
  std::optional<std::string> foreign(const std::string& name) const { return env_(name); }

 private:
  std::map<std::string, std::string, std::less<>> given_;
  EnvLookup env_;
};

}  // namespace mci
