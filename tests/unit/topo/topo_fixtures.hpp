// Where mci-topo's fixtures live, and the golden-file comparison: a golden
// is compared byte for byte; MCI_UPDATE_GOLDENS=1 rewrites it instead (then
// review the diff).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.hpp"
#include "topo/paths.hpp"

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

// The box that the fake sysfs tree and the hand-written hwloc XML both
// describe: GPU0, GPU1 and an HCA behind one switch (upstream port
// 01:00.0 above three downstream ports, folded into one node), GPU2 on the
// other socket. Returns the path GPU0-GPU1.
inline Path expect_switch_box(const Topology& t) {
  const std::vector<int> g = t.gpus();
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(t.nics().size(), 1u);
  if (g.size() != 3 || t.nics().size() != 1) return {};
  EXPECT_EQ(t.at(t.nics()[0]).label, "mlx5_0");
  const Path pix = classify(t, g[0], g[1]);
  EXPECT_EQ(pix.smi, "PIX");
  EXPECT_EQ(pix.via.size(), 1u);
  if (!pix.via.empty()) {
    EXPECT_EQ(t.at(pix.via[0]).busid, "0000:01:00.0");
  }
  EXPECT_EQ(classify(t, g[0], t.nics()[0]).smi, "PIX");
  EXPECT_EQ(classify(t, g[1], g[2]).smi, "SYS");
  EXPECT_EQ(t.at(t.cpu_of(g[2])).numa, 1);
  return pix;
}

}  // namespace mci::topo::testing
