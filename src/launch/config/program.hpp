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
  // "MCI_PYTHON", "PYTHON_EXEC" (torchrun's), "PATH" (python3 for a .py
  // PROGRAM, -m or --run-path) or "the command line" (mcirun python3.11
  // train.py). Both "" otherwise.
  std::string python;
  std::string python_from;
};

// How the program's first word is run (torchrun's -m, --run-path and --no-python).
enum class RunAs {
  by_name,        // NAME.py under Python, anything else as it is
  executable,     // --no-python: as it is, even NAME.py
  python_module,  // -m: python3 -u -m NAME ARGS
  python_script,  // --run-path: python3 -u NAME ARGS, whatever its name
};

// What every process execs. A name without '/' is searched in PATH like
// execvp does. A name ending in .py runs as "python3 -u NAME ARGS"
// (torchrun's habit) unless no_python. The interpreter is MCI_PYTHON, else
// PYTHON_EXEC (torchrun's variable), else python3 from PATH. Throws
// CannotRun when the program (or the interpreter) is missing or not
// executable.
ExecSpec resolve_program(const std::vector<std::string>& command, RunAs how, const EnvLookup& env);
ExecSpec resolve_program(const std::vector<std::string>& command, bool no_python, const EnvLookup& env);

// python, python3, /opt/venv/bin/python3.11: a Python interpreter's name.
bool is_python_interpreter(const std::string& path);

}  // namespace mci::launch
