#include "common/settings_table.hpp"

#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "common/setting_rows.hpp"

namespace mci {

std::span<const SettingRow> setting_rows() noexcept { return kSettingRows; }

const SettingRow* find_setting(std::string_view name) noexcept {
  for (const auto& r : kSettingRows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const SettingRow& setting(std::string_view name) {
  if (const auto* r = find_setting(name)) return *r;
  throw std::logic_error(fmt::format("{} is not a row of mci's settings table (common/setting_rows.hpp)", name));
}

bool settable(const SettingRow& row) noexcept { return row.use != SettingUse::process && row.use != SettingUse::tool; }

std::vector<SettingChoice> choices_of(const SettingRow& row, std::span<const MoreChoices> more) {
  std::vector<SettingChoice> out(row.choices.begin(), row.choices.end());
  for (const auto& m : more) {
    if (m.setting == row.name) out.insert(out.end(), m.choices.begin(), m.choices.end());
  }
  return out;
}

std::string choices_text(const SettingRow& row, bool with_meaning, std::span<const MoreChoices> more) {
  const std::vector<SettingChoice> choices = choices_of(row, more);
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += c.name;
    if (with_meaning && !c.what.empty()) out += fmt::format(" ({})", c.what);
  }
  return out;
}

std::string settings_markdown(SettingSection section) {
  std::string out = "| variable | default | scope | meaning |\n|---|---|---|---|\n";
  for (const auto& r : kSettingRows) {
    if (r.section != section) continue;
    const std::string_view shown = r.shown_default.empty() ? r.fallback : r.shown_default;
    const char* scope = r.ranks_agree                  ? "job, the same on every rank (checked at init)"
                        : r.scope == SettingScope::job ? "job"
                                                       : "each rank its own";
    out += fmt::format("| `{}` | {} | {} | {} |\n", r.name, shown, scope, r.doc);
  }
  return out;
}

}  // namespace mci
