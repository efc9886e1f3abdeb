// A scratch directory for a test, removed with everything in it.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mci::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mci-launch-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text = "", mode_t mode = 0644) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace mci::test
