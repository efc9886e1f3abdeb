// The monitor's typed model of a job (jobview/job_model.hpp): a sample
// crosses the store as JSON and is decoded once where it arrives; what
// another process wrote is input, so a field missing, of another type or
// out of range takes its default and never throws or wraps.
#include <gtest/gtest.h>

#include "jobview/job_model.hpp"

namespace mci::jobview {
namespace {

using json = nlohmann::json;

NodeSample example() {
  GroupSample g;
  g.name = "default";
  g.backend = "cpu";
  g.rank = 1;
  g.size = 2;
  g.timeout_ms = 20000;
  g.running = RunningOp{"all_reduce", "f32", "started", 12, 4096, -1, 3.5};
  g.idle_ms = 0;
  g.last_id = 40;
  g.kinds["all_reduce"] = KindCounters{11, 1, 45056, 0.25};
  g.recent.push_back(RecentOp{11, 4096, "all_reduce", "f32", "cuda", 80.5, 12.25, true});
  RankSample r;
  r.rank = 1;
  r.local_rank = 1;
  r.host = "hostA";
  r.pid = 4'000'000'123;  // over 32 bits: pids are 64-bit here
  r.process = Process::running;
  r.changed_ago_ms = 5.5;
  r.replacement = 2;
  r.dumps = true;
  r.groups.push_back(g);
  NodeSample n;
  n.node = 3;
  n.host = "hostA";
  n.ranks.push_back(r);
  return n;
}

TEST(JobModel, ASampleCrossesTheStoreUnchanged) {
  const NodeSample n = example();
  const json j = n;
  const NodeSample back = json::parse(j.dump()).get<NodeSample>();
  EXPECT_EQ(json(back), j);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].pid, 4'000'000'123);
  EXPECT_EQ(back.ranks[0].process, Process::running);
  ASSERT_NE(back.ranks[0].main_group(), nullptr);
  EXPECT_EQ(back.ranks[0].main_group()->entered(), 12u);
  EXPECT_TRUE(j["ranks"][0]["pid"].is_number_integer());
}

TEST(JobModel, FieldsOfAnotherTypeOrOutOfRangeTakeTheirDefaults) {
  const json j = json::parse(R"({"node": "x", "ranks": [
      {"rank": 1e30, "pid": "12", "process": "zombie", "replacement": -1e300, "dumps": 1,
       "groups": [{"name": 5, "size": 1e20, "running": [1, 2], "recent": {"seq": 1},
                   "kinds": {"all_reduce": {"ops": -3, "bytes": 1e40}, "bad": 7}}]},
      7, null,
      {"rank": 2, "changed_ago_ms": "soon", "groups": "none"}]})");
  NodeSample n;
  ASSERT_NO_THROW(n = j.get<NodeSample>());
  EXPECT_EQ(n.node, 0);
  ASSERT_EQ(n.ranks.size(), 2u);  // the two that are objects
  const RankSample& r = n.ranks[0];
  EXPECT_EQ(r.rank, -1);  // out of an int's range: no rank (the view skips it)
  EXPECT_EQ(r.pid, 0);
  EXPECT_EQ(r.process, Process::starting);  // a state this build does not know
  EXPECT_EQ(r.replacement, 0);
  EXPECT_FALSE(r.dumps);
  ASSERT_EQ(r.groups.size(), 1u);
  const GroupSample& g = r.groups[0];
  EXPECT_EQ(g.name, "");
  EXPECT_EQ(g.size, 0);
  EXPECT_FALSE(g.running.has_value());
  EXPECT_TRUE(g.recent.empty());
  ASSERT_EQ(g.kinds.size(), 1u);
  EXPECT_EQ(g.kinds.at("all_reduce").ops, 0u);    // negative: not a count
  EXPECT_EQ(g.kinds.at("all_reduce").bytes, 0u);  // past 64 bits
  EXPECT_EQ(n.ranks[1].rank, 2);
  EXPECT_FALSE(n.ranks[1].changed_ago_ms.has_value());
  EXPECT_TRUE(n.ranks[1].groups.empty());
}

TEST(JobModel, ProcessNamesRoundTrip) {
  for (Process p : {Process::starting, Process::running, Process::done, Process::lost, Process::failed}) {
    EXPECT_EQ(process_from_name(process_name(p)), p);
  }
  EXPECT_TRUE(gone(Process::lost));
  EXPECT_TRUE(gone(Process::failed));
  EXPECT_FALSE(gone(Process::done));
}

}  // namespace
}  // namespace mci::jobview
