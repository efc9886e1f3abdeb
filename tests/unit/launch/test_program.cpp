#include <gtest/gtest.h>

#include "launch/config/program.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

using Words = std::vector<std::string>;

std::string cannot_run(const Words& command, const EnvLookup& env, bool no_python = false) {
  try {
    resolve_program(command, no_python, env);
  } catch (const CannotRun& e) {
    return e.what();
  }
  return "no error";
}

TEST(Program, NameWithoutSlashIsSearchedInPathAndKeepsItsArgv0) {
  test::TempDir a, b;
  b.file("tool", "#!/bin/sh\n", 0755);
  a.file("tool", "not executable", 0644);  // skipped, like execvp does
  ExecSpec s = resolve_program({"tool", "-x", "--y"}, false, fixed_env({{"PATH", a.path() + ":" + b.path()}}));
  EXPECT_EQ(s.path, b.path() + "/tool");
  EXPECT_EQ(s.argv, (Words{"tool", "-x", "--y"}));
}

TEST(Program, PathWithSlashIsUsedAsIs) {
  ExecSpec s = resolve_program({"/bin/sh", "-c", "true"}, false, fixed_env({{"PATH", "/nonexistent"}}));
  EXPECT_EQ(s.path, "/bin/sh");
  EXPECT_EQ(s.argv, (Words{"/bin/sh", "-c", "true"}));
}

TEST(Program, MissingOrUnrunnableProgramsSayWhy) {
  test::TempDir d;
  const auto env = fixed_env({{"PATH", d.path()}});
  EXPECT_EQ(cannot_run({"foo"}, env).rfind("cannot run 'foo': No such file or directory (not found in PATH", 0), 0u)
      << cannot_run({"foo"}, env);
  EXPECT_EQ(cannot_run({d.path() + "/foo"}, env), "cannot run '" + d.path() + "/foo': No such file or directory");
  const std::string plain = d.file("plain", "data", 0644);
  EXPECT_EQ(cannot_run({plain}, env), "cannot run '" + plain + "': Permission denied");
  EXPECT_EQ(cannot_run({"plain"}, env), "cannot run 'plain': Permission denied");
  EXPECT_EQ(cannot_run({d.path()}, env), "cannot run '" + d.path() + "': Is a directory");
}

TEST(Program, AProgramInTheCurrentDirectoryGetsAHint) {
  test::TempDir d;
  d.file("here", "#!/bin/sh\n", 0755);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(d.path());
  const std::string m = cannot_run({"here"}, fixed_env({{"PATH", "/nonexistent"}}));
  std::filesystem::current_path(cwd);
  EXPECT_NE(m.find("write './here'"), std::string::npos) << m;
}

TEST(Program, PythonScriptsRunWithPython3LikeTorchrun) {
  test::TempDir bin, src;
  bin.file("python3", "#!/bin/sh\n", 0755);
  const std::string script = src.file("labo.py", "print(1)\n", 0644);  // need not be executable
  const auto env = fixed_env({{"PATH", bin.path()}});
  ExecSpec s = resolve_program({script, "--lr", "1"}, false, env);
  EXPECT_EQ(s.path, bin.path() + "/python3");
  EXPECT_EQ(s.argv, (Words{bin.path() + "/python3", "-u", script, "--lr", "1"}));
  // --no_python: the script itself must be runnable.
  EXPECT_EQ(cannot_run({script}, env, true), "cannot run '" + script + "': Permission denied");
  EXPECT_EQ(cannot_run({"missing.py"}, env), "cannot run 'missing.py': No such file or directory");
  EXPECT_EQ(cannot_run({script}, fixed_env({{"PATH", src.path()}})).rfind("cannot run 'python3'", 0), 0u);
}

TEST(Program, APythonProgramKnowsItsInterpreterAndWhatChoseIt) {
  test::TempDir d;
  const std::string script = d.file("train.py", "print(1)\n", 0755);
  const std::string py = d.file("python3", "#!/bin/sh\n", 0755);
  ExecSpec s = resolve_program({script}, false, fixed_env({{"PATH", d.path()}}));
  EXPECT_EQ(s.python, py);
  EXPECT_EQ(s.python_from, "PATH");
  s = resolve_program({script}, false, fixed_env({{"PATH", "/nonexistent"}, {"MCI_PYTHON", py}}));
  EXPECT_EQ(s.python, py);
  EXPECT_EQ(s.python_from, "MCI_PYTHON");
  s = resolve_program({"python3", script}, false, fixed_env({{"PATH", d.path()}}));
  EXPECT_EQ(s.python, py);
  EXPECT_EQ(s.python_from, "the command line");
  s = resolve_program({"/bin/sh", "-c", "true"}, false, fixed_env({}));
  EXPECT_EQ(s.python, "");
  s = resolve_program({script}, true, fixed_env({}));
  EXPECT_EQ(s.python, "") << "--no_python";
}

TEST(Program, ModuleAndRunPathRunUnderPythonLikeTorchrun) {
  test::TempDir d;
  const std::string py = d.file("python3", "#!/bin/sh\n", 0755);
  const std::string script = d.file("train", "print(1)\n", 0644);  // no .py, not executable
  const auto env = fixed_env({{"PATH", d.path()}});
  ExecSpec s = resolve_program({"pkg.train", "--lr", "1"}, RunAs::python_module, env);
  EXPECT_EQ(s.argv, (Words{py, "-u", "-m", "pkg.train", "--lr", "1"}));
  EXPECT_EQ(s.python, py);
  s = resolve_program({script, "x"}, RunAs::python_script, env);
  EXPECT_EQ(s.argv, (Words{py, "-u", script, "x"}));
  EXPECT_EQ(cannot_run({d.path() + "/missing"}, env, false).rfind("cannot run", 0), 0u);
  EXPECT_EQ(resolve_program({script}, RunAs::python_script, env).python_from, "PATH");
  const std::string other = d.file("python3.12", "#!/bin/sh\n", 0755);
  s = resolve_program({"m"}, RunAs::python_module, fixed_env({{"PATH", "/nonexistent"}, {"PYTHON_EXEC", other}}));
  EXPECT_EQ(s.path, other) << "torchrun's PYTHON_EXEC";
  EXPECT_EQ(s.python_from, "PYTHON_EXEC");
  s = resolve_program({"m"}, RunAs::python_module, fixed_env({{"MCI_PYTHON", py}, {"PYTHON_EXEC", other}}));
  EXPECT_EQ(s.path, py) << "MCI_PYTHON first";
  try {
    resolve_program({"m"}, RunAs::python_module, fixed_env({{"PYTHON_EXEC", d.path() + "/nope"}}));
    ADD_FAILURE() << "no error";
  } catch (const CannotRun& e) {
    EXPECT_NE(std::string(e.what()).find("(from PYTHON_EXEC)"), std::string::npos) << e.what();
  }
}

TEST(Program, PythonInterpretersAreKnownByName) {
  for (const char* p : {"python", "python3", "/usr/bin/python3.11", "/opt/venv/bin/python3.12d"}) {
    EXPECT_TRUE(is_python_interpreter(p)) << p;
  }
  for (const char* p : {"/usr/bin/python3-config", "pythonista", "/bin/sh", "./train"}) {
    EXPECT_FALSE(is_python_interpreter(p)) << p;
  }
}

}  // namespace
}  // namespace mci::launch
