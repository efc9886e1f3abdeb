// Reading environment variables through a function, so decisions made from
// the environment (the job's coordinates, the launcher's scheduler, GPUs and
// token) can be tested with any environment.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mci {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment (getenv).
EnvLookup process_env();
// A fixed environment, for tests.
EnvLookup fixed_env(std::map<std::string, std::string> vars);

}  // namespace mci
