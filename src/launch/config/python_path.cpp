#include "launch/config/python_path.hpp"

#include <filesystem>
#include <system_error>

namespace mci::launch {

std::string mci_python_path_for(const std::string& exe_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path bin = fs::weakly_canonical(fs::path(exe_path), ec).parent_path();
  for (const fs::path& dir : {bin.parent_path() / MCI_PYTHON_SUBDIR, bin.parent_path() / "python"}) {
    if (fs::exists(dir / "mci_torch" / "__init__.py", ec)) return dir.string();
  }
  return {};
}

std::string mci_python_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : mci_python_path_for(self.string());
}

}  // namespace mci::launch
