#include "spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "test_paths.hpp"

extern char** environ;

namespace mci::test {

std::string Child::output() const {
  std::ifstream f(output_path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Spawner::Spawner() {
  char tmpl[] = "/tmp/mci-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

Spawner::~Spawner() {
  kill_all(SIGKILL);
  for (auto& c : children_) {
    if (!c.status) {
      int st = 0;
      ::waitpid(c.pid, &st, 0);
    }
    ::unlink(c.output_path.c_str());
  }
  ::rmdir(dir_.c_str());
}

std::size_t Spawner::spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           bool new_session) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) merged[std::string(static_cast<const char*>(*e), eq)] = eq + 1;
  }
  for (const auto& [k, v] : env) {
    if (v == "\x01") {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
  std::vector<std::string> envs;
  for (const auto& [k, v] : merged) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  Child c;
  c.output_path = dir_ + "/out." + std::to_string(children_.size());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, c.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (new_session) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  int rc = posix_spawn(&c.pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  children_.push_back(c);
  return children_.size() - 1;
}

ExitStatus Spawner::wait(std::size_t i, std::chrono::milliseconds limit) {
  Child& c = children_[i];
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!c.status) {
    int st = 0;
    pid_t r = ::waitpid(c.pid, &st, WNOHANG);
    if (r == c.pid) {
      ExitStatus s;
      s.exited = WIFEXITED(st);
      s.code = s.exited ? WEXITSTATUS(st) : -1;
      s.sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
      c.status = s;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &st, 0);
      ExitStatus s;
      s.sig = SIGKILL;
      s.timed_out = true;
      c.status = s;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return *c.status;
}

void Spawner::wait_all(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    wait(i, std::max(left, std::chrono::milliseconds(0)));
  }
}

void Spawner::kill_all(int sig) {
  for (auto& c : children_) {
    if (!c.status) ::kill(c.pid, sig);
  }
}

std::string built(const std::string& name) { return std::string(MCI_TEST_BIN_DIR) + "/" + name; }

bool process_alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  auto rp = line.rfind(')');
  if (rp == std::string::npos || rp + 2 >= line.size()) return false;
  return line[rp + 2] != 'Z' && line[rp + 2] != 'X';
}

std::vector<std::string> mci_shm_segments() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("mci-", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> mci_shm_segments_of(const std::vector<pid_t>& pids) {
  std::vector<std::string> out;
  for (const auto& name : mci_shm_segments()) {
    for (const pid_t p : pids) {
      if (name.rfind(fmt::format("mci-{}-", p), 0) == 0) out.push_back(name);
    }
  }
  return out;
}

}  // namespace mci::test
