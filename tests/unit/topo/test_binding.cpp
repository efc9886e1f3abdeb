#include <gtest/gtest.h>

#include "topo/binding.hpp"
#include "topo/nccl_xml.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

std::vector<std::string> lists(const std::vector<RankCpus>& plan) {
  std::vector<std::string> out;
  for (const RankCpus& r : plan) {
    std::string s;
    for (int c : r.cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
    out.push_back(s);
  }
  return out;
}

TEST(Binding, Modes) {
  EXPECT_EQ(parse_bind_mode("numa"), BindMode::numa);
  EXPECT_EQ(parse_bind_mode("core"), BindMode::core);
  EXPECT_EQ(parse_bind_mode("none"), BindMode::none);
  EXPECT_FALSE(parse_bind_mode("socket"));
}

TEST(Binding, NumaFollowsEachGpusNode) {
  const Topology t = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  const std::vector<RankCpus> plan = plan_binding(t, BindMode::numa, 4, {});
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[1].cpus.front(), 0);
  EXPECT_EQ(plan[1].cpus.size(), 16u);
  EXPECT_EQ(plan[2].cpus.front(), 16);
  EXPECT_EQ(plan[2].why, "NUMA node 1 of GPU2");
  EXPECT_TRUE(plan_binding(t, BindMode::none, 4, {}).at(0).cpus.empty());
}

TEST(Binding, CoreSplitsEachNodeAmongItsRanks) {
  const Topology t = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  const std::vector<RankCpus> plan = plan_binding(t, BindMode::core, 4, {});
  EXPECT_EQ(plan[0].cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(plan[1].cpus, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(plan[3].cpus.front(), 24);
  EXPECT_EQ(plan[3].why, "share 2 of 2 of NUMA node 1 of GPU3");
}

TEST(Binding, OnlyAllowedCpus) {
  const Topology t = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  const std::vector<RankCpus> plan = plan_binding(t, BindMode::numa, 4, {2, 3, 20});
  EXPECT_EQ(lists(plan), (std::vector<std::string>{"2,3", "2,3", "20", "20"}));
}

TEST(Binding, WithoutGpus) {
  const Topology t = read_nccl_xml(
      "<system version=\"1\"><cpu numaid=\"0\" affinity=\"0f\"/><cpu numaid=\"1\" affinity=\"f0\"/></system>",
      "cpus.xml");
  EXPECT_EQ(lists(plan_binding(t, BindMode::numa, 3, {})), (std::vector<std::string>{"0,1,2,3", "4,5,6,7", "0,1,2,3"}));
  EXPECT_EQ(lists(plan_binding(t, BindMode::core, 3, {})), (std::vector<std::string>{"0,1", "2,3", "4,5"}));
  EXPECT_EQ(lists(plan_binding(t, BindMode::core, 16, {})).at(9), "1");  // more ranks than CPUs: they wrap
}

}  // namespace
}  // namespace mci::topo
