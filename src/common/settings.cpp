#include "common/settings.hpp"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "common/env.hpp"
#include "mci/errors.hpp"

namespace mci {

namespace {

bool honoured(const SettingRow& r, SettingUses uses) {
  switch (r.use) {
    case SettingUse::group: return true;
    case SettingUse::mci_algorithms: return uses.mci_algorithms;
    case SettingUse::mci_transports: return uses.mci_transports;
    default: return false;
  }
}

std::string out_of_range(std::string_view who, const std::string& value, const SettingRow& r) {
  return fmt::format("{}={} is out of range: use {} .. {} ({})", who, value, r.min, r.max, r.unit);
}

long long read_integer(const SettingRow& r, const std::optional<std::string>& v) {
  if (!v || v->empty()) return parse_int(std::string(r.fallback)).value_or(0);
  const auto n = parse_int(*v);
  if (!n)
    throw ConfigError(fmt::format("{}='{}' is not an integer: set it to a whole number, or unset it", r.name, *v));
  if (*n < r.min || *n > r.max) throw ConfigError(out_of_range(r.name, std::to_string(*n), r));
  return *n;
}

long long field_integer(const SettingRow& r, const FieldDefault& f) {
  if (f.value > static_cast<unsigned long long>(std::numeric_limits<long long>::max()) ||
      static_cast<long long>(f.value) < r.min || static_cast<long long>(f.value) > r.max) {
    throw ConfigError(out_of_range(f.field, std::to_string(f.value), r));
  }
  return static_cast<long long>(f.value);
}

std::string read_choice(const SettingRow& r, const std::optional<std::string>& v, std::span<const MoreChoices> more) {
  if (!v || v->empty()) return std::string(r.fallback);
  for (const auto& c : choices_of(r, more)) {
    if (*v == c.name) return *v;
  }
  throw ConfigError(fmt::format("{}='{}' is not {}: use {}", r.name, *v, r.noun, choices_text(r, true, more)));
}

}  // namespace

long long read_integer_setting(IntegerSetting s, const std::optional<std::string>& value) {
  return read_integer(s.row(), value);
}

Settings Settings::resolve(const SettingSource& source, SettingUses uses, std::span<const MoreChoices> more,
                           std::span<const FieldDefault> fields) {
  Settings s;
  s.values_.resize(kSettingRows.size());
  for (std::size_t i = 0; i < kSettingRows.size(); ++i) {
    const SettingRow& r = kSettingRows[i];
    if (!honoured(r, uses)) continue;
    Value& v = s.values_[i];
    const std::optional<std::string> raw = source.raw(r.name);
    switch (r.kind) {
      case SettingKind::integer: {
        const FieldDefault* field = nullptr;
        for (const auto& f : fields) {
          if (f.setting.index() == i) field = &f;
        }
        v.number = field && !raw ? field_integer(r, *field) : read_integer(r, raw);
        v.text = std::to_string(v.number);
        break;
      }
      case SettingKind::choice: v.text = read_choice(r, raw, more); break;
      case SettingKind::text: v.text = raw && !raw->empty() ? *raw : std::string(r.fallback); break;
      case SettingKind::flag:
        v.number = raw.has_value() ? 1 : 0;
        v.text = raw ? "set" : "unset";
        break;
    }
    v.resolved = true;
    if (r.ranks_agree) s.agreed_ += fmt::format("{}{}={}", s.agreed_.empty() ? "" : " ", r.name, v.text);
  }
  return s;
}

std::string Settings::agreed_names(SettingUses uses) {
  std::vector<std::string_view> names;
  for (const auto& r : kSettingRows) {
    if (r.ranks_agree && honoured(r, uses)) names.push_back(r.name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " and " : ", ", names[i]);
  }
  return out;
}

const Settings::Value& Settings::value(std::size_t index) const {
  if (index >= values_.size() || !values_[index].resolved) {
    throw std::logic_error(
        fmt::format("{} is read by a layer of a group whose backend does not honour it", kSettingRows[index].name));
  }
  return values_[index];
}

}  // namespace mci
