#include <gtest/gtest.h>

#include "topo/link_rates.hpp"
#include "topo/paths.hpp"
#include "topo/sysfs_import.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

Topology fake_box() {
  Topology t = read_sysfs(fixture("sysfs-2socket-3gpu"));
  add_host_facts(t, fixture("proc-bare-metal"));
  t.finish();
  return t;
}

TEST(Sysfs, NumaNodesAndTheirCpus) {
  const Topology t = fake_box();
  ASSERT_EQ(t.cpus().size(), 2u);
  EXPECT_EQ(t.at(t.cpus()[0]).numa, 0);
  EXPECT_EQ(t.at(t.cpus()[0]).cpus, "0-7");
  EXPECT_EQ(t.at(t.cpus()[1]).cpus, "8-15");
  EXPECT_EQ(t.at(t.cpus()[0]).vendor, "GenuineIntel");
  EXPECT_EQ(t.at(t.cpus()[0]).cpu_model, 143);
}

TEST(Sysfs, SwitchPortsFoldIntoOneSwitch) { testing::expect_switch_box(fake_box()); }

TEST(Sysfs, CurrentAndMaximumLinkSpeeds) {
  const Topology t = fake_box();
  const Node& slow = t.at(t.gpus()[0]);
  EXPECT_DOUBLE_EQ(slow.up.gts, 16.0);
  EXPECT_DOUBLE_EQ(slow.up.max_gts, 32.0);
  EXPECT_EQ(slow.up.width, 16);
  EXPECT_DOUBLE_EQ(classify(t, t.gpus()[0], t.gpus()[1]).GBps, pcie_GBps(16, 16));
}

TEST(Sysfs, HostFacts) {
  Topology bare = fake_box();
  EXPECT_NE(bare.kernel_cmdline.find("intel_iommu=on"), std::string::npos);
  EXPECT_FALSE(bare.hypervisor);
  Topology vm;
  add_host_facts(vm, fixture("proc-vm"));
  EXPECT_TRUE(vm.hypervisor);
}

TEST(Sysfs, MissingTreeGivesOneCpuAndNoDevices) {
  const Topology t = read_sysfs(fixture("no-such-sysfs"));
  ASSERT_EQ(t.cpus().size(), 1u);
  EXPECT_EQ(t.at(t.cpus()[0]).numa, -1);
  EXPECT_TRUE(t.gpus().empty());
}

}  // namespace
}  // namespace mci::topo
