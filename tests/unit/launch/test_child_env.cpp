#include <gtest/gtest.h>

#include <map>

#include "launch/child_env.hpp"

namespace mci::launch {
namespace {

std::map<std::string, std::string> as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const auto& kv : env) {
    const auto eq = kv.find('=');
    EXPECT_NE(eq, std::string::npos) << kv;
    EXPECT_TRUE(m.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second) << "twice: " << kv;
  }
  return m;
}

JobConfig two_nodes() {
  JobConfig j;
  j.nnodes = 2;
  j.node_rank = 1;
  j.nproc_per_node = 3;
  j.master_addr = "node01";
  j.master_port = 29531;
  return j;
}

TEST(ChildEnv, PlacesTheProcessInTheJob) {
  auto m = as_map(child_environment({"HOME=/root", "PATH=/bin"}, two_nodes(), 2, "tok", false));
  EXPECT_EQ(m["RANK"], "5");
  EXPECT_EQ(m["LOCAL_RANK"], "2");
  EXPECT_EQ(m["WORLD_SIZE"], "6");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(m["GROUP_RANK"], "1");
  EXPECT_EQ(m["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(m["MASTER_ADDR"], "node01");
  EXPECT_EQ(m["MASTER_PORT"], "29531");
  EXPECT_EQ(m["MCI_STORE_HOSTED"], "1");
  EXPECT_EQ(m["MCI_JOB_TOKEN"], "tok");
  EXPECT_EQ(m["HOME"], "/root");
  EXPECT_EQ(m["PATH"], "/bin");
  EXPECT_EQ(m.count("OMP_NUM_THREADS"), 0u);
}

TEST(ChildEnv, ReplacesInheritedValuesAndDropsAnEmptyToken) {
  auto m = as_map(child_environment({"RANK=9", "MASTER_PORT=1", "MCI_STORE_HOSTED=0", "MCI_JOB_TOKEN=old",
                                     "OMP_NUM_THREADS=8", "X=a=b"},
                                    two_nodes(), 0, "", true));
  EXPECT_EQ(m["RANK"], "3");
  EXPECT_EQ(m["MASTER_PORT"], "29531");
  EXPECT_EQ(m["MCI_STORE_HOSTED"], "1");
  EXPECT_EQ(m.count("MCI_JOB_TOKEN"), 0u);
  EXPECT_EQ(m["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(m["X"], "a=b");
}

TEST(ChildEnv, TokenFromTheUserElseFreshForOneNodeElseNone) {
  EXPECT_EQ(choose_token(fixed_env({{"MCI_JOB_TOKEN", "mine"}}), 4), "mine");
  const std::string a = choose_token(fixed_env({}), 1);
  const std::string b = choose_token(fixed_env({{"MCI_JOB_TOKEN", ""}}), 1);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(choose_token(fixed_env({}), 2), "");
}

TEST(ChildEnv, OmpDefaultOnlyWhenUnsetAndSeveralProcesses) {
  EXPECT_TRUE(omp_default_needed(fixed_env({}), 2));
  EXPECT_FALSE(omp_default_needed(fixed_env({}), 1));
  EXPECT_FALSE(omp_default_needed(fixed_env({{"OMP_NUM_THREADS", "4"}}), 2));
  EXPECT_FALSE(omp_default_needed(fixed_env({{"OMP_NUM_THREADS", ""}}), 2));
  EXPECT_NE(omp_banner().find("OMP_NUM_THREADS=1"), std::string::npos);
  EXPECT_EQ(omp_banner().find('\n'), std::string::npos);  // one line
}

TEST(ChildEnv, CurrentEnvironmentIsThisProcesssOwn) {
  ::setenv("MCI_LAUNCH_TEST_VAR", "v1", 1);
  auto m = as_map(current_environment());
  EXPECT_EQ(m["MCI_LAUNCH_TEST_VAR"], "v1");
  ::unsetenv("MCI_LAUNCH_TEST_VAR");
}

}  // namespace
}  // namespace mci::launch
