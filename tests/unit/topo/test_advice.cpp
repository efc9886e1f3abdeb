#include <gtest/gtest.h>

#include "topo/advice.hpp"
#include "topo/live_import.hpp"
#include "topo/nccl_xml.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

std::vector<std::string> names(const Topology& t, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(t.at(id).name);
  return out;
}

const AlgorithmFit& fit(const Advice& a, const std::string& algorithm) {
  for (const AlgorithmFit& f : a.fits) {
    if (f.algorithm == algorithm) return f;
  }
  throw std::runtime_error("no advice for " + algorithm);
}

bool warns(const Advice& a, const std::string& text) {
  for (const std::string& w : a.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(Advice, TwoSocketPcieBox) {
  const Topology t = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  const Advice a = advise(t);
  EXPECT_EQ(names(t, a.ring.order), (std::vector<std::string>{"GPU0", "GPU1", "GPU2", "GPU3"}));
  EXPECT_DOUBLE_EQ(a.ring.GBps, 22.0);  // Sapphire Rapids' socket link in NCCL's model
  EXPECT_NE(a.ring.bottleneck.find("(SYS)"), std::string::npos);
  EXPECT_FALSE(a.ring.over_nvlink);
  EXPECT_FALSE(fit(a, "all-to-all/direct").fits);
  EXPECT_TRUE(fit(a, "ring").fits);
  EXPECT_TRUE(fit(a, "tree").fits);
  EXPECT_TRUE(warns(a, "4 GPU pairs (SYS"));
  EXPECT_FALSE(warns(a, "VM"));
  ASSERT_EQ(a.bindings.size(), 2u);
  EXPECT_EQ(a.bindings[1].cpus, "16-31");
  EXPECT_EQ(names(t, a.bindings[1].gpus), (std::vector<std::string>{"GPU2", "GPU3"}));
}

TEST(Advice, RingOrderFollowsTheTreeNotTheIndices) {
  // GPU indices interleave the sockets; the ring must not cross them 4 times.
  std::string xml = testing::read_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  for (auto [from, to] :
       {std::pair{"dev=\"1\"", "dev=\"9\""}, {"dev=\"2\"", "dev=\"1\""}, {"dev=\"9\"", "dev=\"2\""}}) {
    xml.replace(xml.find(from), std::string(from).size(), to);
  }
  const Topology t = read_nccl_xml(xml, "interleaved.xml");
  const Advice a = advise(t);
  EXPECT_EQ(names(t, a.ring.order), (std::vector<std::string>{"GPU0", "GPU2", "GPU1", "GPU3"}));
}

TEST(Advice, NvSwitchBoxFitsDirect) {
  const Topology t = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu.xml"));
  const Advice a = advise(t);
  EXPECT_TRUE(a.ring.over_nvlink);
  EXPECT_DOUBLE_EQ(a.ring.GBps, 450.0);
  EXPECT_TRUE(fit(a, "all-to-all/direct").fits);
  EXPECT_FALSE(fit(a, "tree").fits);
  EXPECT_TRUE(a.warnings.empty());
}

TEST(Advice, FlatVm) {
  const Topology t = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu-vm.xml"));
  const Advice a = advise(t);
  EXPECT_TRUE(warns(a, "looks like a VM"));
  EXPECT_TRUE(warns(a, "NUMA ids are hidden"));
  EXPECT_TRUE(warns(a, "28 GPU pairs (PHB"));
  EXPECT_FALSE(fit(a, "all-to-all/direct").fits);
}

TEST(Advice, IommuAndSlowLinksOnTheFakeSysfs) {
  LiveSources s;
  s.sys_root = fixture("sysfs-2socket-3gpu");
  s.proc_root = fixture("proc-bare-metal");
  s.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  const Advice bare = advise(read_live(s));
  EXPECT_TRUE(warns(bare, "'intel_iommu=on'"));
  EXPECT_TRUE(warns(bare, "GPU0 (0000:03:00.0) runs its link at 16.0 GT/s PCIe x16, below its maximum 32.0 GT/s"));
  s.proc_root = fixture("proc-vm");  // iommu=pt, hypervisor flag
  const Advice vm = advise(read_live(s));
  EXPECT_FALSE(warns(vm, "iommu"));
  EXPECT_TRUE(warns(vm, "the CPU reports a hypervisor"));
}

}  // namespace
}  // namespace mci::topo
