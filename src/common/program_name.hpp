// How a message names another of mci's programs for the user to run: by its
// bare name when PATH finds that very program, else by its path beside the
// running one (a prefix not on PATH, a build tree), never by a guessed
// build path like build/bin/NAME.
#pragma once

#include <string>

#include "common/env_lookup.hpp"

namespace mci {

// self_exe: the running program's path ("" when unknown).
std::string program_to_run(const std::string& name, const std::string& self_exe, const EnvLookup& env);

// Same, for this process (/proc/self/exe) and its environment.
std::string program_to_run(const std::string& name);

}  // namespace mci
