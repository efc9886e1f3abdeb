// docs/env.md lists the algorithms and backends as the tables hold them:
// a row added to a table without its line in the docs fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "backends/registry.hpp"
#include "collectives/algorithm_table.hpp"
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

}  // namespace
}  // namespace mci
