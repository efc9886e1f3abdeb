#include "launch/config/program.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace mci::launch {

CannotRun::CannotRun(const std::string& program, int err, const std::string& hint)
    : ConfigError(fmt::format("cannot run '{}': {}{}", program, std::strerror(err), hint)) {}

namespace {

// 0 if path is an executable file, else the errno exec would give.
int executable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return EACCES;
  return 0;
}

std::string search_path(const std::string& name, const EnvLookup& env) {
  const std::string path = env("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  int err = ENOENT;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    const int e = executable(candidate);
    if (e == 0) return candidate;
    if (e == EACCES) err = EACCES;  // like execvp: report a file found but not runnable
  }
  std::string hint;
  if (err == ENOENT && executable("./" + name) == 0) {
    hint = fmt::format(" (not found in PATH; to run the one in this directory, write './{}')", name);
  } else if (err == ENOENT) {
    hint = " (not found in PATH; give its path, e.g. ./" + name + ")";
  }
  throw CannotRun(name, err, hint);
}

}  // namespace

bool is_python_interpreter(const std::string& path) {
  const std::string base = path.substr(path.rfind('/') + 1);
  if (base.rfind("python", 0) != 0) return false;
  // python, python3, python3.11, python3.12d: not python-config nor pythonista.
  return base.find_first_not_of("0123456789.dmu", 6) == std::string::npos;
}

ExecSpec resolve_program(const std::vector<std::string>& command, bool no_python, const EnvLookup& env) {
  return resolve_program(command, no_python ? RunAs::executable : RunAs::by_name, env);
}

ExecSpec resolve_program(const std::vector<std::string>& command, RunAs how, const EnvLookup& env) {
  const std::string& name = command.at(0);
  const bool dot_py = name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0;
  const bool python = how == RunAs::python_module || how == RunAs::python_script || (how == RunAs::by_name && dot_py);
  if (python) {
    if (how != RunAs::python_module) {  // a module is Python's to find
      struct stat st {};
      if (::stat(name.c_str(), &st) != 0) throw CannotRun(name, errno);
      if (S_ISDIR(st.st_mode)) throw CannotRun(name, EISDIR);
    }
    ExecSpec spec;
    // MCI_PYTHON picks the interpreter, else PYTHON_EXEC as under torchrun
    // (whose default is its own interpreter); else python3.
    std::string from = "PATH";
    std::string python = "python3";
    for (const char* var : {"MCI_PYTHON", "PYTHON_EXEC"}) {
      if (const auto chosen = env(var); chosen && !chosen->empty()) {
        python = *chosen;
        from = var;
        break;
      }
    }
    if (python.find('/') != std::string::npos) {
      if (int e = executable(python); e != 0) throw CannotRun(python, e, fmt::format(" (from {})", from));
      spec.path = python;
    } else {
      spec.path = search_path(python, env);
    }
    spec.python = spec.path;
    spec.python_from = from;
    spec.argv = {spec.path, "-u"};
    if (how == RunAs::python_module) spec.argv.push_back("-m");
    spec.argv.insert(spec.argv.end(), command.begin(), command.end());
    return spec;
  }
  ExecSpec spec{name, command};
  if (name.find('/') != std::string::npos) {
    if (int e = executable(name); e != 0) throw CannotRun(name, e);
  } else {
    spec.path = search_path(name, env);
  }
  if (is_python_interpreter(spec.path)) {
    spec.python = spec.path;
    spec.python_from = "the command line";
  }
  return spec;
}

}  // namespace mci::launch
