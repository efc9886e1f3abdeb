// A group's settings, resolved once at init: each row the group honours
// (settings_table.hpp), read from the program's values, then the
// environment, then its default, and checked by its row (type, range,
// choices). Every layer reads the same snapshot by the variable's name:
// `settings.integer("MCI_TCP_SPIN_US")` compiles only when that is a row of
// kind integer, and costs an index at run time, so a setting needs its row
// and its reader, nothing in between.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/setting_rows.hpp"
#include "common/setting_source.hpp"
#include "common/settings_table.hpp"

namespace mci {

namespace detail {

// The row of `name`, which must be of `kind`: a name that is not a row, or
// a read as another kind, does not compile (a throw in a consteval call).
consteval std::size_t setting_index(std::string_view name, SettingKind kind) {
  for (std::size_t i = 0; i < kSettingRows.size(); ++i) {
    if (kSettingRows[i].name != name) continue;
    if (kSettingRows[i].kind != kind) throw "this setting is read as another kind than its row says";
    return i;
  }
  throw "not a row of mci's settings table (common/setting_rows.hpp)";
}

// `value` must be one of the own choices of the choice row `index`: a typo
// does not compile.
consteval void check_choice(std::size_t index, std::string_view value) {
  for (const SettingChoice& c : kSettingRows[index].choices) {
    if (c.name == value) return;
  }
  throw "not one of this setting's choices (its row in common/setting_rows.hpp)";
}

}  // namespace detail

// A row of the table, named where it is read: "MCI_TCP_SPIN_US".
template <SettingKind K>
class SettingKey {
 public:
  template <std::size_t N>
  consteval SettingKey(const char (&name)[N])  // NOLINT(google-explicit-constructor): a name reads as its key
      : index_(detail::setting_index(std::string_view(name, N - 1), K)) {}
  constexpr std::size_t index() const noexcept { return index_; }
  const SettingRow& row() const noexcept { return kSettingRows[index_]; }

 private:
  std::size_t index_;
};
// One choice of a choice row, both named where it is compared and checked
// at compile time: `settings.is({"MCI_CONNECT", "eager"})`.
class ChoiceValue {
 public:
  template <std::size_t N, std::size_t M>
  consteval ChoiceValue(const char (&setting)[N], const char (&value)[M])
      : index_(detail::setting_index(std::string_view(setting, N - 1), SettingKind::choice)), value_(value, M - 1) {
    detail::check_choice(index_, value_);
  }
  constexpr std::size_t index() const noexcept { return index_; }
  constexpr std::string_view value() const noexcept { return value_; }
  // Whether a raw value (a launcher's environment, read before any group)
  // names this choice.
  constexpr bool named_by(std::string_view raw) const noexcept { return raw == value_; }

 private:
  std::size_t index_;
  std::string_view value_;
};

using IntegerSetting = SettingKey<SettingKind::integer>;
using ChoiceSetting = SettingKey<SettingKind::choice>;
using TextSetting = SettingKey<SettingKind::text>;
using FlagSetting = SettingKey<SettingKind::flag>;

// Which rows a group resolves: the group's own (SettingUse::group), and
// those its backend honours by its capabilities. A row it does not honour
// is not read, so its value cannot fail a group that ignores it.
struct SettingUses {
  bool mci_algorithms = false;
  bool mci_transports = false;
};

// A typed field of InitOptions that stands in for a row's default (the
// variable, set or given, still wins): checked by the row, and named in its
// message.
struct FieldDefault {
  IntegerSetting setting;
  std::string_view field;  // "InitOptions::flight_recorder_entries"
  unsigned long long value;
};

// One integer row read outside a group (a launcher's own): `value`, the
// variable's when it is set, checked by the row; unset or empty, the row's
// fallback. Throws ConfigError naming the variable and what it accepts.
long long read_integer_setting(IntegerSetting s, const std::optional<std::string>& value);

class Settings {
 public:
  // Throws ConfigError naming the variable (or the field), the value and
  // what its row accepts, for the first bad one. `more`: the choices rows
  // take from layers above common (MCI_TRANSPORT's mesh kinds).
  static Settings resolve(const SettingSource& source, SettingUses uses, std::span<const MoreChoices> more = {},
                          std::span<const FieldDefault> fields = {});

  long long integer(IntegerSetting s) const { return value(s.index()).number; }
  // The choice's name, one of the row's (or of its more choices).
  const std::string& choice(ChoiceSetting s) const { return value(s.index()).text; }
  // Whether the row's value is that choice (checked at compile time).
  bool is(ChoiceValue c) const { return value(c.index()).text == c.value(); }
  const std::string& text(TextSetting s) const { return value(s.index()).text; }
  bool flag(FlagSetting s) const { return value(s.index()).number != 0; }

  // "MCI_ALGO=auto MCI_TRANSPORT=shm ..." for the resolved rows the ranks
  // must agree on, each as its kind reads it ("4096" and " 4096" agree):
  // what init compares between ranks.
  const std::string& agreed() const noexcept { return agreed_; }
  // Their names, "MCI_ALGO, ... and MCI_CONNECT", for the message.
  static std::string agreed_names(SettingUses uses);

 private:
  struct Value {
    bool resolved = false;
    long long number = 0;  // integer; flag: 1 when set
    std::string text;      // choice, text
  };
  // Reading a row the group did not resolve is a bug in mci (a reader in a
  // layer its backend does not reach): std::logic_error.
  const Value& value(std::size_t index) const;

  std::vector<Value> values_;  // by row index
  std::string agreed_;
};

}  // namespace mci
