#include <gtest/gtest.h>

#include "mci/errors.hpp"
#include "topo/link_rates.hpp"
#include "topo/nccl_xml.hpp"
#include "topo/paths.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

std::string cell(const Topology& t, const std::string& a, const std::string& b) {
  int x = -1, y = -1;
  for (const Node& n : t.nodes) {
    if (n.name == a) x = n.id;
    if (n.name == b) y = n.id;
  }
  EXPECT_GE(x, 0) << a;
  EXPECT_GE(y, 0) << b;
  return x < 0 || y < 0 ? "" : classify(t, x, y).smi;
}

TEST(NcclXml, TwoSocketPcieBox) {
  const Topology t = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  ASSERT_EQ(t.gpus().size(), 4u);
  ASSERT_EQ(t.nics().size(), 1u);
  EXPECT_EQ(cell(t, "GPU0", "GPU1"), "PIX");
  EXPECT_EQ(cell(t, "GPU2", "GPU3"), "PIX");
  EXPECT_EQ(cell(t, "GPU1", "GPU2"), "SYS");
  EXPECT_EQ(cell(t, "GPU0", "NIC0"), "PIX");
  EXPECT_EQ(cell(t, "NIC0", "GPU3"), "SYS");
  EXPECT_EQ(t.at(t.cpu_of(t.gpus()[2])).cpus, "16-31");
  EXPECT_EQ(t.at(t.nics()[0]).label, "mlx5_0");
  EXPECT_DOUBLE_EQ(t.at(t.nics()[0]).nic_gbps, 400.0);
  EXPECT_TRUE(t.no_gpu_reason.empty());
}

TEST(NcclXml, NvSwitchBox) {
  const Topology t = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu.xml"));
  ASSERT_EQ(t.gpus().size(), 8u);
  for (int a : t.gpus()) {
    for (int b : t.gpus()) {
      if (a == b) continue;
      const Path p = classify(t, a, b);
      EXPECT_EQ(p.smi, "NV18");
      EXPECT_DOUBLE_EQ(p.GBps, 18 * nvlink_GBps(90));
    }
  }
  EXPECT_EQ(cell(t, "GPU0", "NIC0"), "PIX");
  EXPECT_EQ(cell(t, "GPU0", "NIC1"), "NODE");
  EXPECT_EQ(cell(t, "GPU0", "NIC2"), "SYS");
}

TEST(NcclXml, FlatVmHidesSwitchesAndNuma) {
  const Topology t = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu-vm.xml"));
  ASSERT_EQ(t.gpus().size(), 8u);
  EXPECT_EQ(cell(t, "GPU0", "GPU7"), "PHB");
  EXPECT_DOUBLE_EQ(classify(t, t.gpus()[0], t.gpus()[7]).GBps, pcie_GBps(16, 16));
  EXPECT_EQ(t.at(t.cpus()[0]).numa, -1);
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("link width 0"), std::string::npos);
}

TEST(NcclXml, CapturedH200Vm) {
  const Topology t = read_nccl_xml_file(fixture("h200-vm-captured/nccl-topo.xml"));
  ASSERT_EQ(t.gpus().size(), 1u);
  EXPECT_EQ(t.at(t.gpus()[0]).sm, 90);
  EXPECT_EQ(t.at(t.gpus()[0]).busid, "0000:00:06.0");
  EXPECT_EQ(t.at(t.nics()[0]).label, "eth0");
}

TEST(NcclXml, ExportReadsBackToTheSamePaths) {
  for (const char* f : {"nccl/pcie-2socket-4gpu.xml", "nccl/nvswitch-8gpu.xml", "nccl/nvswitch-8gpu-vm.xml",
                        "nccl/gpu-nic-switch.xml"}) {
    const Topology a = read_nccl_xml_file(fixture(f));
    const std::string xml = write_nccl_xml(a);
    const Topology b = read_nccl_xml(xml, "exported");
    const std::vector<Path> pa = all_paths(a), pb = all_paths(b);
    ASSERT_EQ(pa.size(), pb.size()) << f;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].smi, pb[i].smi) << f << " path " << i;
      EXPECT_DOUBLE_EQ(pa[i].GBps, pb[i].GBps) << f << " path " << i;
    }
    EXPECT_EQ(write_nccl_xml(b), xml) << f;
  }
}

TEST(NcclXml, RefusesWhatIsNotNcclXml) {
  try {
    read_nccl_xml("<topology><object/></topology>", "lstopo.xml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL_TOPO_DUMP_FILE"), std::string::npos) << e.what();
  }
  try {
    read_nccl_xml_file("/nonexistent/topo.xml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/topo.xml"), std::string::npos) << e.what();
  }
}

TEST(NcclXml, NoGpuSaysSo) {
  const Topology t = read_nccl_xml("<system version=\"1\"><cpu numaid=\"0\" affinity=\"ff\"/></system>", "cpu.xml");
  EXPECT_TRUE(t.gpus().empty());
  EXPECT_EQ(t.no_gpu_reason, "cpu.xml lists no <gpu>");
}

}  // namespace
}  // namespace mci::topo
