// mci-topo's outputs for the fixtures, byte for byte (tests/fixtures/topo/golden).
#include <gtest/gtest.h>

#include "topo/advice.hpp"
#include "topo/live_import.hpp"
#include "topo/nccl_xml.hpp"
#include "topo/render.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::expect_golden;
using testing::fixture;

class NcclGoldens : public ::testing::TestWithParam<const char*> {};

TEST_P(NcclGoldens, MatrixJsonDotP2p) {
  const std::string name = GetParam();
  // Named without the checkout's path, which the outputs quote.
  const Topology t = read_nccl_xml(testing::read_file(fixture("nccl/" + name + ".xml")), name + ".xml");
  expect_golden(name + ".matrix.txt", matrix_text(t) + "\n" + advice_text(t, advise(t)));
  expect_golden(name + ".json", json_text(t, advise(t)));
  expect_golden(name + ".dot", dot_text(t));
  expect_golden(name + ".p2p.txt", p2p_text(t, 'r'));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NcclGoldens,
                         ::testing::Values("pcie-2socket-4gpu", "nvswitch-8gpu", "nvswitch-8gpu-vm", "gpu-nic-switch"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(SysfsGoldens, FakeTreeWithoutNvml) {
  LiveSources s;
  s.sys_root = fixture("sysfs-2socket-3gpu");
  s.proc_root = fixture("proc-bare-metal");
  s.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  Topology t = read_live(s);
  t.source = "sysfs sysfs-2socket-3gpu";
  for (std::string& n : t.notes) {
    const auto at = n.find("(/nonexistent");
    if (at != std::string::npos) n.erase(at - 1, n.find(')', at) - at + 2);
  }
  expect_golden("sysfs-2socket-3gpu.matrix.txt", matrix_text(t) + "\n" + advice_text(t, advise(t)));
  expect_golden("sysfs-2socket-3gpu.dot", dot_text(t));
}

// docs/topology.md shows two fixtures' matrix and advice as mci-topo prints them.
TEST(Docs, TopologyMdQuotesTheGoldens) {
  const std::string doc = testing::read_file(std::string(MCI_DOCS_DIR) + "/topology.md");
  ASSERT_FALSE(doc.empty());
  for (const char* name : {"pcie-2socket-4gpu", "nvswitch-8gpu-vm"}) {
    const std::string golden = testing::read_file(fixture(std::string("golden/") + name + ".matrix.txt"));
    const std::string matrix = golden.substr(0, golden.find("\nLegend:"));
    const std::string advice = golden.substr(golden.find("Advice:"));
    EXPECT_NE(doc.find(matrix), std::string::npos) << "docs/topology.md lacks the matrix of " << name;
    EXPECT_NE(doc.find(advice), std::string::npos) << "docs/topology.md lacks the advice for " << name;
  }
  EXPECT_NE(doc.find(testing::read_file(fixture("golden/pcie-2socket-4gpu.dot"))), std::string::npos);
}

}  // namespace
}  // namespace mci::topo
