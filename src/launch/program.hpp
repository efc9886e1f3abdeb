// Finding the program before anything starts, so "not found" is one clear
// line and no process or store is left behind.
#pragma once

#include <string>
#include <utility>
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
  ExecSpec() = default;
  ExecSpec(std::string p, std::vector<std::string> a) : path(std::move(p)), argv(std::move(a)) {}

  std::string path;               // what execve runs
  std::vector<std::string> argv;  // what the program sees; argv[0] as typed
  // When the program is Python: the interpreter's path, and what chose it:
  // "MCI_PYTHON", "PATH" (python3 for a .py PROGRAM) or "the command line"
  // (mcirun python3.11 train.py). Both "" otherwise.
  std::string python;
  std::string python_from;
};

// What every process execs. A name without '/' is searched in PATH like
// execvp does. A name ending in .py runs as "python3 -u NAME ARGS"
// (torchrun's habit) unless no_python. Throws CannotRun when the program
// (or python3) is missing or not executable.
ExecSpec resolve_program(const std::vector<std::string>& command, bool no_python, const EnvLookup& env);

// python, python3, /opt/venv/bin/python3.11: a Python interpreter's name.
bool is_python_interpreter(const std::string& path);

}  // namespace mci::launch
