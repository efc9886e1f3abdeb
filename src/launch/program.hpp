// Finding the program before anything starts, so "not found" is one clear
// line and no process or store is left behind.
#pragma once

#include <string>
#include <vector>

#include "common/env_lookup.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

// "cannot run 'foo': No such file or directory"; mcirun exits 1.
class CannotRun : public ConfigError {
 public:
  CannotRun(const std::string& program, int err, const std::string& hint = {});
};

struct ExecSpec {
  std::string path;               // what execve runs
  std::vector<std::string> argv;  // what the program sees; argv[0] as typed
};

// What every process execs. A name without '/' is searched in PATH like
// execvp does. A name ending in .py runs as "python3 -u NAME ARGS"
// (torchrun's habit) unless no_python. Throws CannotRun when the program
// (or python3) is missing or not executable.
ExecSpec resolve_program(const std::vector<std::string>& command, bool no_python, const EnvLookup& env);

}  // namespace mci::launch
