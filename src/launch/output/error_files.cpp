#include "launch/output/error_files.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mci::launch {

ErrorFiles::ErrorFiles(int first_rank, int nranks) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mcirun-errors-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(),
                            "mcirun: cannot make a folder for error files at " + pattern);
  }
  dir_ = buf.data();
  for (int r = first_rank; r < first_rank + nranks; ++r) {
    std::filesystem::create_directory(std::filesystem::path(error_file_path(dir_, r)).parent_path());
  }
}

ErrorFiles::~ErrorFiles() {
  std::error_code ec;  // best effort: a rank may have left files we cannot remove
  std::filesystem::remove_all(dir_, ec);
}

std::string error_file_path(const std::string& dir, int rank) { return fmt::format("{}/rank{}/error.json", dir, rank); }

std::optional<std::string> recorded_exception(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  // {"message": {"message": "RuntimeError: ...", "extraInfo": {...}}}; older
  // writers put the text directly under "message".
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  const auto& m = j["message"];
  if (m.is_string()) return m.get<std::string>();
  if (m.is_object() && m.contains("message") && m["message"].is_string()) return m["message"].get<std::string>();
  return std::nullopt;
}

}  // namespace mci::launch
