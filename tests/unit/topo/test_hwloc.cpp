// hwloc's XML (built only with hwloc): this machine's export, and a
// hand-written 2-socket box with a PCIe switch.
#include <gtest/gtest.h>

#include <sstream>

#include "mci/errors.hpp"
#include "topo/app.hpp"
#include "topo/hwloc_import.hpp"
#include "topo/link_rates.hpp"
#include "topo/paths.hpp"
#include "topo/render.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

Topology load(const std::string& name) {
  Topology t = read_hwloc(fixture("hwloc/" + name));
  t.finish();
  return t;
}

TEST(Hwloc, SwitchWithTwoGpusAndAnHca) {
  const Topology t = load("2socket-switch.xml");
  const Path pix = testing::expect_switch_box(t);
  // hwloc gives rates only: GPU1's 31.5 GB/s is the narrowest link.
  EXPECT_NEAR(pix.GBps, pcie_GBps(16, 16), 0.01);
  EXPECT_EQ(t.at(t.cpus()[0]).vendor, "GenuineIntel");
}

TEST(Hwloc, ThisMachinesExport) {
  const Topology t = load("this-vm-2cpu.xml");
  EXPECT_TRUE(t.gpus().empty());
  ASSERT_EQ(t.cpus().size(), 1u);
  EXPECT_EQ(t.at(t.cpus()[0]).cpus, "0-1");
  ASSERT_EQ(t.nics().size(), 1u);
  EXPECT_EQ(t.at(t.nics()[0]).label, "eth0");
}

TEST(Hwloc, CliSaysWhyNoGpuAndMatchesTheGolden) {
  std::ostringstream out, err;
  const int code = topo_main({"mci-topo", "-m", "--hwloc-xml", fixture("hwloc/this-vm-2cpu.xml")}, out, err);
  EXPECT_EQ(code, 0) << err.str();
  std::string text = out.str();
  const std::string path = fixture("hwloc/");
  for (auto at = text.find(path); at != std::string::npos; at = text.find(path)) text.erase(at, path.size());
  testing::expect_golden("this-vm-2cpu.hwloc.matrix.txt", text);
}

TEST(Hwloc, UnreadableFile) {
  try {
    read_hwloc(fixture("nccl/pcie-2socket-4gpu.xml"));
    FAIL() << "NCCL's XML was read as hwloc's";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("lstopo --of xml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mci::topo
