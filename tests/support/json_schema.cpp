#include "support/json_schema.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "support/temp_dir.hpp"
#include "test_paths.hpp"

namespace mci::test {

std::string job_api_schema() { return std::string(MCI_DOCS_DIR) + "/api/job.schema.json"; }

std::string schema_errors(const std::string& schema_path, const std::vector<nlohmann::json>& documents) {
  TempDir dir;
  const std::string docs = dir.path() + "/documents.jsonl";
  {
    std::ofstream out(docs);
    for (const auto& d : documents) out << d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  // Debian's interpreter: python3-jsonschema is installed for it.
  const std::string cmd =
      fmt::format("/usr/bin/python3 {}/tests/python/check_schema.py '{}' '{}' 2>&1", MCI_SOURCE_DIR, schema_path, docs);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "could not start the schema checker: " + cmd;
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return {};
  return out.empty() ? fmt::format("the schema checker failed (status {}): {}", st, cmd) : out;
}

}  // namespace mci::test
