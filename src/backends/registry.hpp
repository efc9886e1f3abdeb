// The backend table: every backend mci knows, whether this build contains
// it, how to make one and what it does (BackendCaps, mci/backend_caps.hpp).
// init_process_group, the "unknown backend" and "not built" messages,
// list_backends() and find_backend_info() (so mci-perf, the examples and the
// torch backend), the group's refusal of a kind or a recv from any source
// the backend cannot run, and shrink() read it: the code above the table
// tells backends apart by their capabilities only, never by their names.
//
// To add a backend: a class behind the Backend interface in backends/NAME/
// with its factory, the folder's backend.cmake (its sources, and the find
// when it needs an optional library: cmake/optional_backends.cmake), and its
// row in registry.cpp, where the factory is declared beside it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "common/settings_table.hpp"
#include "mci/backend_caps.hpp"

namespace mci {

struct BackendEntry {
  std::string_view name;
  std::string_view what;   // one line for help texts
  std::string_view needs;  // what must be installed for the build to contain it ("" for none)
  bool built;
  std::unique_ptr<Backend> (*make)(const BackendContext&);  // nullptr when not built
  BackendCaps caps;                  // what the code above the table may count on (mci/backend_caps.hpp)
  std::string_view cannot_shrink{};  // why, when !caps.shrinks: shrink()'s message says it
};

std::span<const BackendEntry> backend_table() noexcept;
const BackendEntry* find_backend(std::string_view name) noexcept;
// "cpu (mci's engine on host memory), gloo (...), nccl (...)".
std::string backend_names();
// The backends whose row has the capability, for messages that suggest one:
// "cpu (MCI_BACKEND=cpu) or nccl (MCI_BACKEND=nccl)".
std::string backends_with(bool BackendCaps::*cap);
// The backends whose row lists the kind, in the same words.
std::string backends_running(OpKind kind);

// A call of a kind the backend's row does not list: refuse_kind's
// ConfigError (backend.hpp). The front end checks it at the call.
void require_kind(const BackendEntry& b, OpKind kind);

// A setting that this backend does not honour, as rank 0 says it once
// ("MCI_ALGO=ring is ignored on the gloo backend, ..."); nullopt when the
// backend honours it or the setting is not a backend's.
std::optional<std::string> ignored_setting(const BackendEntry& b, const SettingRow& setting, const std::string& value);

// A recv from any source (d.from_any_source()) on a backend whose row
// cannot take one: ConfigError naming the backend and what to do instead.
void require_any_source(std::string_view backend, const coll::CollectiveDesc& d);

// The backend's entry; ConfigError for an unknown backend or one this build
// lacks (before anything connects).
const BackendEntry& require_backend(std::string_view name);
// require_backend(name).make(ctx).
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendContext& ctx);

}  // namespace mci
