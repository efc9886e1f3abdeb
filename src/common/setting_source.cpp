#include "common/setting_source.hpp"

#include <stdexcept>
#include <vector>

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

const SettingRow& SettingSource::row(std::string_view name, SettingKind kind) const {
  const SettingRow& r = setting(name);
  if (r.kind != kind) throw std::logic_error(fmt::format("{} is read as another kind than its row says", name));
  return r;
}

long long SettingSource::integer(std::string_view name) const {
  const SettingRow& r = row(name, SettingKind::integer);
  const auto v = raw(name);
  if (!v || v->empty()) return parse_int(std::string(r.fallback)).value_or(0);
  const auto n = parse_int(*v);
  if (!n) throw ConfigError(fmt::format("{}='{}' is not an integer: set it to a whole number, or unset it", name, *v));
  if (*n < r.min || *n > r.max) {
    throw ConfigError(fmt::format("{}={} is out of range: use {} .. {} ({})", name, *n, r.min, r.max, r.unit));
  }
  return *n;
}

std::string SettingSource::choice(std::string_view name) const {
  const SettingRow& r = row(name, SettingKind::choice);
  const auto v = raw(name);
  if (!v || v->empty()) return std::string(r.fallback);
  for (const auto& c : r.choices) {
    if (*v == c.name) return *v;
  }
  throw ConfigError(fmt::format("{}='{}' is not {}: use {}", name, *v, r.noun, choices_text(r, true)));
}

std::string SettingSource::text(std::string_view name) const {
  const SettingRow& r = row(name, SettingKind::text);
  const auto v = raw(name);
  return v && !v->empty() ? *v : std::string(r.fallback);
}

bool SettingSource::flag(std::string_view name) const {
  (void)row(name, SettingKind::flag);
  return raw(name).has_value();
}

namespace {

std::vector<const SettingRow*> agreed_rows(bool mci_algorithms, bool mci_transports) {
  std::vector<const SettingRow*> out;
  for (const auto& r : setting_rows()) {
    if (!r.ranks_agree) continue;
    if ((r.use == SettingUse::mci_algorithms && !mci_algorithms) ||
        (r.use == SettingUse::mci_transports && !mci_transports)) {
      continue;
    }
    out.push_back(&r);
  }
  return out;
}

}  // namespace

std::string SettingSource::agreed_names(bool mci_algorithms, bool mci_transports) {
  const auto rows = agreed_rows(mci_algorithms, mci_transports);
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == rows.size() ? " and " : ", ", rows[i]->name);
  }
  return out;
}

std::string SettingSource::agreed_part(bool mci_algorithms, bool mci_transports) const {
  std::string out;
  for (const SettingRow* row : agreed_rows(mci_algorithms, mci_transports)) {
    const SettingRow& r = *row;
    // Read as its kind says, so that "4096" and " 4096" agree.
    std::string v;
    switch (r.kind) {
      case SettingKind::integer: v = std::to_string(integer(r.name)); break;
      case SettingKind::choice: v = choice(r.name); break;
      case SettingKind::text: v = text(r.name); break;
      case SettingKind::flag: v = flag(r.name) ? "set" : "unset"; break;
    }
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", r.name, v);
  }
  return out;
}

}  // namespace mci
