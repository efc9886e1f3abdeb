// Reading the process environment with messages a user can act on.
#pragma once

#include <optional>
#include <string>

namespace mci {

std::optional<std::string> env_str(const char* name);
// Parses a whole decimal integer; throws ConfigError naming the variable,
// its value and `context` (e.g. "env://") when it is not one.
std::optional<long long> env_int(const char* name, const std::string& context);
// The same for a setting of mci's own: the message names the variable alone.
std::optional<long long> env_int(const char* name);
// Like env_int but a missing variable throws "environment variable NAME
// expected, but not set" with the context.
long long env_int_required(const char* name, const std::string& context);
std::string env_str_required(const char* name, const std::string& context);

// Strict decimal parse of a whole string; nullopt on any junk or overflow.
std::optional<long long> parse_int(const std::string& s);

}  // namespace mci
