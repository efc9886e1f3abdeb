#include "common/setting_source.hpp"

#include <fmt/format.h>

#include "common/env.hpp"
#include "mci/errors.hpp"

namespace mci {

SettingSource::SettingSource(std::map<std::string, std::string> given, EnvLookup env) : env_(std::move(env)) {
  for (auto& [name, value] : given) {
    const SettingRow* r = find_setting(name);
    if (!r) {
      std::string known;
      for (const auto& row : setting_rows()) {
        if (settable(row)) {
          known += fmt::format("{}{}", known.empty() ? "" : ", ", row.name);
        }
      }
      throw ConfigError(
          fmt::format("'{}' is not one of mci's settings: the settings a program can give are {}", name, known));
    }
    if (!settable(*r)) {
      throw ConfigError(
          fmt::format("{} is read from the environment by {}, not by a group: set it in the environment instead of the "
                      "group's settings",
                      name,
                      r->use == SettingUse::process ? "the process when it first logs" : "the tool that uses it"));
    }
    given_.emplace(name, std::move(value));
  }
}

SettingSource SettingSource::environment() { return SettingSource({}, process_env()); }

std::optional<std::string> SettingSource::raw(std::string_view name) const {
  std::optional<std::string> v;
  if (auto it = given_.find(name); it != given_.end()) {
    v = it->second;
  } else {
    v = env_(std::string(name));
  }
  // Values travel as lines (the settings check, the host map): one that
  // holds a line break would be read as two.
  if (v && v->find('\n') != std::string::npos) {
    throw ConfigError(fmt::format("{} holds a line break: use a value on one line", name));
  }
  return v;
}

bool SettingSource::chosen(std::string_view name) const {
  const auto v = raw(name);
  return v && !v->empty() && *v != setting(name).fallback;
}

}  // namespace mci
