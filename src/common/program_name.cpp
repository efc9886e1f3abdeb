#include "common/program_name.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace mci {

namespace {

bool runnable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string program_to_run(const std::string& name, const std::string& self_exe, const EnvLookup& env) {
  namespace fs = std::filesystem;
  const fs::path beside = self_exe.empty() ? fs::path() : fs::path(self_exe).parent_path() / name;
  const bool have_beside = !beside.empty() && runnable(beside);
  const std::string path = env("PATH").value_or("");
  std::size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    const std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (!runnable(candidate)) continue;
    // The first one PATH finds is what the user's shell would run: its bare
    // name is right only when it is ours (the one installed beside us).
    std::error_code ec;
    if (!have_beside || fs::equivalent(candidate, beside, ec)) return name;
    break;
  }
  if (have_beside) {
    std::error_code ec;
    const fs::path full = fs::weakly_canonical(beside, ec);
    return ec ? beside.string() : full.string();
  }
  return name;
}

std::string program_to_run(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return program_to_run(name, ec ? std::string() : self.string(), process_env());
}

}  // namespace mci
