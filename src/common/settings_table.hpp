// mci's settings table: every MCI_* variable the library and its tools read,
// declared once (common/setting_rows.hpp), with its type, default, accepted
// values, scope, whether the ranks must agree on it, who honours it and its
// line of docs/env.md. A group resolves the rows it honours once, at init,
// into a Settings (common/settings.hpp) that its layers read by name,
// checked at compile time; test_docs checks docs/env.md against the table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mci {

enum class SettingKind {
  integer,  // a whole number within [min, max]
  choice,   // one of the row's choices (empty or unset: the default)
  text,     // any one line (its reader may check more, e.g. MCI_ALGO's names)
  flag,     // set (to anything) or not
};

enum class SettingScope {
  job,   // one value for the whole job
  rank,  // each rank's own (ranks may differ)
};

// Where a setting has effect: the backends it applies to are those whose
// row has the capability (a notice is said when another backend is given
// one), or the tool that reads it.
enum class SettingUse {
  group,           // every backend: the group's own machinery
  mci_algorithms,  // backends that run mci's algorithms (BackendCaps::mci_algorithms)
  mci_transports,  // backends on mci's transports (BackendCaps::mci_transports)
  process,         // the process, before any group (the logger): read from the environment only
  launcher,        // set by mcirun for its ranks
  tool,            // read by a tool (mcirun, mci-topo), not by a group
};

// The section of docs/env.md a row is documented in.
enum class SettingSection { tuning, launcher, tools };

struct SettingChoice {
  std::string_view name;
  std::string_view what;  // for messages: "connect every pair at init"
};

// Choices a row takes from a layer above common, after its own:
// MCI_TRANSPORT's are `auto` and `shm`, then one per mesh kind (the rows of
// transport/mesh.cpp). Whoever checks or lists values passes them in.
struct MoreChoices {
  std::string_view setting;
  std::span<const SettingChoice> choices;
};

struct SettingRow {
  std::string_view name;
  SettingKind kind;
  std::string_view fallback;  // the default, as the variable would spell it ("" for unset)
  long long min = 0;          // integer: the accepted range
  long long max = 0;
  std::string_view unit{};  // integer: what the number counts, for messages ("microseconds")
  std::span<const SettingChoice> choices{};
  std::string_view noun{};  // choice: what a value is, for messages ("a transport")
  SettingScope scope;
  bool ranks_agree;  // init refuses ranks whose values differ
  SettingUse use;
  SettingSection section;
  std::string_view shown_default{};  // docs/env.md's default column when it is not `fallback` as is
  std::string_view doc{};            // docs/env.md's meaning column
};

std::span<const SettingRow> setting_rows() noexcept;
// nullptr for a name that is not a setting.
const SettingRow* find_setting(std::string_view name) noexcept;
// The row of a name the code knows is one (a typo in mci's own code throws
// std::logic_error, caught by the first test that reads it).
const SettingRow& setting(std::string_view name);

// Whether a program may give it (InitOptions::settings): the logger's and
// the tools' are read from the environment only.
bool settable(const SettingRow& row) noexcept;
// The row's choices, then those `more` holds for it.
std::vector<SettingChoice> choices_of(const SettingRow& row, std::span<const MoreChoices> more = {});
// "auto, shm or tcp" / "lazy (connect ...) or eager (...)" for messages.
std::string choices_text(const SettingRow& row, bool with_meaning, std::span<const MoreChoices> more = {});
// docs/env.md's table of one section, as test_docs expects it.
std::string settings_markdown(SettingSection section);

}  // namespace mci
