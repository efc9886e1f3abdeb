// docs/env.md lists the algorithms, backends and settings as the tables hold
// them: a row added to a table without its line in the docs fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "backends/registry.hpp"
#include "collectives/algorithm_table.hpp"
#include "common/settings_table.hpp"
#include "test_paths.hpp"

namespace mci {
namespace {

std::string read_doc(const std::string& name) {
  std::ifstream f(std::string(MCI_DOCS_DIR) + "/" + name);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool has_line_starting(const std::string& doc, const std::string& prefix) {
  return doc.starts_with(prefix) || doc.find("\n" + prefix) != std::string::npos;
}

TEST(Docs, EnvMdListsEveryAlgorithmWithWhatItServesAndWhereItRuns) {
  const std::string doc = read_doc("env.md");
  ASSERT_FALSE(doc.empty());
  for (const auto& n : algo_names()) {
    std::string kinds;
    coll::Place place = coll::Place::library;
    for (const auto& r : coll::algorithm_table()) {
      if (r.algo != n.algo) continue;
      kinds += (kinds.empty() ? "" : ", ") + std::string(op_name(r.kind));
      place = r.place;
    }
    if (kinds.empty()) kinds = "every collective";
    const std::string alias = n.alias.empty() ? "" : " (`" + std::string(n.alias) + "`)";
    const std::string line =
        "| `" + std::string(n.name) + "`" + alias + " | " + kinds + " | " + std::string(coll::place_name(place)) + " |";
    EXPECT_TRUE(has_line_starting(doc, line)) << "docs/env.md lacks a line starting with\n" << line;
  }
}

// One row per backend, its capabilities in words (what mci-perf, the
// examples and init's notices act on).
std::string caps_cells(const BackendCaps& c) {
  const std::string memory = c.host_memory && c.cuda_memory ? "host and GPU (staged)"
                             : c.cuda_memory                ? (c.gpu_per_rank ? "GPU, one per rank" : "GPU")
                                                            : "host";
  const auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  return memory + " | " + yes(c.mci_algorithms) + " | " + yes(c.mci_transports) + " | " +
         (c.fingerprints ? "MismatchError" : "timeout") + " | " + yes(c.reports_arrivals) + " | " +
         (c.aborts_running ? "at once" : "at their timeout") + " |";
}

TEST(Docs, EnvMdListsEveryBackendWithItsCapabilities) {
  const std::string doc = read_doc("env.md");
  for (const auto& b : backend_table()) {
    const std::string needs = b.needs.empty() ? "nothing" : std::string(b.needs);
    const std::string line =
        "| `" + std::string(b.name) + "` | " + std::string(b.what) + " | " + caps_cells(b.caps) + " " + needs + " |";
    EXPECT_TRUE(has_line_starting(doc, line)) << "docs/env.md lacks the line\n" << line;
  }
}

// The tuning table is the settings table's rendering, whole: its lines are
// written once, in common/setting_rows.hpp.
TEST(Docs, EnvMdTuningTableIsTheSettingsTable) {
  const std::string doc = read_doc("env.md");
  const auto at = doc.find("## Tuning and diagnostics\n");
  ASSERT_NE(at, std::string::npos) << "docs/env.md lacks its '## Tuning and diagnostics' section";
  const auto begin = doc.find("\n| variable", at) + 1;
  ASSERT_NE(begin, 0u) << "docs/env.md's tuning section has no table";
  auto end = doc.find("\n\n", begin);
  if (end == std::string::npos) end = doc.size();
  const std::string table = doc.substr(begin, end - begin + 1);
  const std::string expected = settings_markdown(SettingSection::tuning);
  EXPECT_EQ(table, expected) << "docs/env.md's tuning table differs from common/setting_rows.hpp: replace it "
                                "with\n"
                             << expected;
}

TEST(Docs, EnvMdNamesEveryOtherSetting) {
  const std::string doc = read_doc("env.md");
  for (const auto& r : setting_rows()) {
    if (r.section == SettingSection::tuning) continue;
    EXPECT_NE(doc.find("`" + std::string(r.name) + "`"), std::string::npos) << "docs/env.md does not name " << r.name;
  }
}

// A variable read anywhere in mci's code is a row of the table: no reader
// of its own that the docs and InitOptions::settings would not know.
TEST(Docs, EveryMciVariableTheCodeNamesIsASetting) {
  namespace fs = std::filesystem;
  const std::regex literal("\"(MCI_[A-Z0-9_]+)\"");
  std::set<std::string> unknown;
  int files = 0;
  for (const char* folder : {"src", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(MCI_SOURCE_DIR) / folder)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      ++files;
      std::ifstream f(e.path());
      std::stringstream text;
      text << f.rdbuf();
      const std::string s = text.str();
      for (std::sregex_iterator m(s.begin(), s.end(), literal), stop; m != stop; ++m) {
        if (!find_setting((*m)[1].str())) unknown.insert((*m)[1].str() + " (" + e.path().filename().string() + ")");
      }
    }
  }
  EXPECT_GT(files, 100);
  for (const auto& u : unknown)
    ADD_FAILURE() << u << " is read by the code but is not a row of common/setting_rows.hpp";
}

}  // namespace
}  // namespace mci
