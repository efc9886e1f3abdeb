// Reading the process environment with messages a user can act on.
#pragma once

#include <optional>
#include <string>

#include "common/env_lookup.hpp"

namespace mci {

std::optional<std::string> env_str(const char* name);
// Parses a whole decimal integer; throws ConfigError naming the variable,
// its value and `context` (e.g. "env://") when it is not one.
std::optional<long long> env_int(const char* name, const std::string& context);
// The same for a setting of mci's own: the message names the variable alone.
std::optional<long long> env_int(const char* name);
// The same through a lookup (a launcher's environment, a test's).
std::optional<long long> env_int(const EnvLookup& env, const char* name, const std::string& context);
// The "environment variable NAME expected, but not set" ConfigError, with a
// hint appended when not empty.
[[noreturn]] void throw_env_missing(const char* name, const std::string& context, const std::string& hint = "");

// Strict decimal parse of a whole string; nullopt on any junk or overflow.
std::optional<long long> parse_int(const std::string& s);

}  // namespace mci
