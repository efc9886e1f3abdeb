#include <gtest/gtest.h>

#include "topo/cpu_sets.hpp"
#include "topo/link_rates.hpp"

namespace mci::topo {
namespace {

TEST(LinkRates, PcieLineRatesPerDirection) {
  // 128b/130b coding from Gen3 on, 8b/10b before.
  EXPECT_NEAR(pcie_GBps(8, 16), 15.75, 0.01);
  EXPECT_NEAR(pcie_GBps(16, 16), 31.5, 0.01);
  EXPECT_NEAR(pcie_GBps(32, 16), 63.0, 0.05);
  EXPECT_NEAR(pcie_GBps(5, 8), 4.0, 0.01);
  EXPECT_NEAR(pcie_GBps(32, 8), pcie_GBps(32, 16) / 2, 1e-9);
}

TEST(LinkRates, NcclModelValues) {
  EXPECT_DOUBLE_EQ(pcie_nccl_GBps(8, 16), 12.0);
  EXPECT_DOUBLE_EQ(pcie_nccl_GBps(16, 16), 24.0);
  EXPECT_DOUBLE_EQ(pcie_nccl_GBps(32, 16), 48.0);
  EXPECT_DOUBLE_EQ(nvlink_nccl_GBps(90), 20.6);
  EXPECT_DOUBLE_EQ(nvlink_GBps(90) * 18, 450.0);
}

TEST(LinkRates, HiddenWidthCountsAsSixteenLanes) { EXPECT_DOUBLE_EQ(pcie_GBps(16, 0), pcie_GBps(16, 16)); }

TEST(LinkRates, SpeedsAndGenerations) {
  EXPECT_DOUBLE_EQ(parse_gts("32.0 GT/s PCIe"), 32.0);
  EXPECT_DOUBLE_EQ(parse_gts("2.5 GT/s"), 2.5);
  EXPECT_DOUBLE_EQ(parse_gts("Unknown"), 0.0);
  EXPECT_EQ(pcie_generation(2.5), 1);
  EXPECT_EQ(pcie_generation(8), 3);
  EXPECT_EQ(pcie_generation(16), 4);
  EXPECT_EQ(pcie_generation(32), 5);
  EXPECT_EQ(pcie_generation(0), 0);
  EXPECT_EQ(gts_text(16), "16.0 GT/s PCIe");
}

TEST(LinkRates, SocketLinksByCpu) {
  EXPECT_DOUBLE_EQ(smp_GBps("x86_64", "GenuineIntel", 6, 143), 22.0);
  EXPECT_DOUBLE_EQ(smp_GBps("x86_64", "GenuineIntel", 6, 207), 40.0);
  EXPECT_DOUBLE_EQ(smp_GBps("x86_64", "AuthenticAMD", 25, 17), 16.0);
}

TEST(CpuSets, ListsAndMasksRoundTrip) {
  const std::vector<int> cpus = parse_cpu_list("0-3,8,32-33");
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 32, 33}));
  EXPECT_EQ(cpu_list_text(cpus), "0-3,8,32-33");
  EXPECT_EQ(cpu_mask_text(cpus), "00000003,0000010f");
  EXPECT_EQ(parse_cpu_mask("00000003,0000010f"), cpus);
  EXPECT_EQ(cpu_list_text(parse_cpu_mask("ffff0000")), "16-31");
  EXPECT_TRUE(parse_cpu_list("").empty());
}

}  // namespace
}  // namespace mci::topo
