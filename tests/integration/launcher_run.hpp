// Running the built mcirun from a test: its stdout and stderr in separate
// files, its exit status and wall time, and a scratch directory its
// processes can write to (exported to them as TEST_DIR).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/scenario.hpp"
#include "support/spawn.hpp"

namespace mci::test {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

using Strings = std::vector<std::string>;

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// mcirun's flags, then the program and its arguments.
inline Strings args(Strings flags, const Strings& program) {
  flags.insert(flags.end(), program.begin(), program.end());
  return flags;
}

// The system's interpreter: the programs these tests start need no torch.
inline constexpr const char* kPython = "/usr/bin/python3";

// Polls cond every 10 ms until it holds or the limit passes.
inline bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// elastic_train's "final rank R world W sum S" lines: (W, S) each.
inline std::vector<std::pair<int, double>> finals(const std::string& out) {
  std::vector<std::pair<int, double>> f;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    int r = 0, w = 0;
    char sum[64] = {};
    if (std::sscanf(line.c_str(), "final rank %d world %d sum %63s", &r, &w, sum) == 3) {
      f.emplace_back(w, std::strtod(sum, nullptr));
    }
  }
  return f;
}

class Mcirun {
 public:
  // mcirun ARGS..., with the test's environment plus env ("\x01" removes).
  explicit Mcirun(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    char tmpl[] = "/tmp/mcirun-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    env.emplace("TEST_DIR", dir_);
    // Nothing of an outer job leaks in unless a test says so.
    for (const char* v : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MCI_JOB_TOKEN",
                          "OMP_NUM_THREADS", "SLURM_STEP_ID", "SLURM_STEPID", "OMPI_COMM_WORLD_SIZE"}) {
      env.emplace(v, "\x01");
    }
    // sh puts stderr in its own file, then becomes mcirun (same pid).
    std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$TEST_DIR/stderr\"", built("mcirun")};
    argv.insert(argv.end(), args.begin(), args.end());
    start_ = std::chrono::steady_clock::now();
    spawner_.spawn(argv, env);
  }
  ~Mcirun() {
    spawner_.kill_all(SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  ExitStatus wait(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    ExitStatus s = spawner_.wait(0, limit);
    if (!wall_) wall_ = std::chrono::steady_clock::now() - start_;
    return s;
  }
  // Exit code, or 1000+signal when mcirun itself died by a signal.
  int code(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    ExitStatus s = wait(limit);
    return s.exited ? s.code : 1000 + s.sig;
  }
  double seconds() const { return wall_ ? std::chrono::duration<double>(*wall_).count() : -1; }

  pid_t pid() { return spawner_.child(0).pid; }
  std::string out() { return spawner_.child(0).output(); }
  std::string err() const { return slurp(dir_ + "/stderr"); }
  std::string all() { return "--- stdout:\n" + out() + "--- stderr:\n" + err(); }
  const std::string& dir() const { return dir_; }
  std::string file(const std::string& name) const { return slurp(dir_ + "/" + name); }
  bool has_file(const std::string& name) const { return std::filesystem::exists(dir_ + "/" + name); }

 private:
  std::string dir_;
  Spawner spawner_;
  std::chrono::steady_clock::time_point start_;
  std::optional<std::chrono::steady_clock::duration> wall_;
};

// A test run in the background of a non-interactive shell inherits SIGINT
// ignored; a program started with SIGINT ignored cannot catch it (Python
// installs no KeyboardInterrupt handler, sh cannot trap it). Tests of what
// mcirun passes on start their processes from the default instead.
class DefaultSigint {
 public:
  DefaultSigint() {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGINT, &dfl, &old_);
  }
  ~DefaultSigint() { ::sigaction(SIGINT, &old_, nullptr); }
  DefaultSigint(const DefaultSigint&) = delete;
  DefaultSigint& operator=(const DefaultSigint&) = delete;

 private:
  struct sigaction old_ {};
};

// The pids a job's processes wrote into TEST_DIR (one per line, any files
// named prefix*).
inline std::vector<pid_t> recorded_pids(const Mcirun& m, const std::string& prefix) {
  std::vector<pid_t> pids;
  for (const auto& e : std::filesystem::directory_iterator(m.dir())) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    for (const auto& l : lines_of(slurp(e.path().string()))) {
      if (!l.empty()) pids.push_back(static_cast<pid_t>(std::stol(l)));
    }
  }
  return pids;
}

}  // namespace mci::test
