// Where mci-topo's fixtures live, and the golden-file comparison: a golden
// is compared byte for byte; MCI_UPDATE_GOLDENS=1 rewrites it instead (then
// review the diff).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace mci::topo::testing {

inline std::string fixture(const std::string& relative) { return std::string(MCI_TOPO_FIXTURES) + "/" + relative; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = fixture("golden/" + name);
  const char* update = std::getenv("MCI_UPDATE_GOLDENS");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " is missing: create it with MCI_UPDATE_GOLDENS=1 and review it";
  EXPECT_EQ(read_file(path), actual) << "output differs from " << path;
}

}  // namespace mci::topo::testing
