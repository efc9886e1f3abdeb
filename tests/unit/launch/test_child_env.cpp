#include <gtest/gtest.h>

#include <map>

#include "launch/config/rank_loss.hpp"
#include "launch/ranks/child_env.hpp"
#include "support/ports.hpp"

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

// A configuration and the attempt made from it, as run_job makes them.
struct Case {
  JobConfig job;
  Attempt a;
};

Case two_nodes() {
  Case c;
  c.job.nnodes = 2;
  c.job.node_rank = 1;
  c.job.nproc_per_node = 3;
  c.job.master_addr = "node01";
  // Nothing listens in these tests; the ports are still ones the OS says are free.
  c.job.master_port = test::free_port();
  c.job.run_id = "job7";
  JobStore s;
  s.host = c.job.master_addr;
  s.port = c.job.master_port;
  c.a = first_attempt(c.job, s);
  c.a.program_port = test::free_port();
  c.a.error_dir = "/tmp/errs";
  return c;
}

std::vector<std::string> child_env(const std::vector<std::string>& base, Case c, int local_rank,
                                   const std::string& token, bool set_omp, const std::string& python_path = {}) {
  c.a.store.token = token;
  return child_environment(base, c.job, c.a, local_rank, set_omp, python_path);
}

TEST(ChildEnv, PlacesTheProcessInTheJob) {
  const Case job = two_nodes();
  auto m = as_map(child_env({"HOME=/root", "PATH=/bin"}, job, 2, "tok", false));
  EXPECT_EQ(m["RANK"], "5");
  EXPECT_EQ(m["LOCAL_RANK"], "2");
  EXPECT_EQ(m["WORLD_SIZE"], "6");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(m["GROUP_RANK"], "1");
  EXPECT_EQ(m["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(m["MASTER_ADDR"], "node01");
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(job.a.program_port));  // the program's, not the store's
  EXPECT_EQ(m["MCI_STORE_ADDR"], "node01");
  EXPECT_EQ(m["MCI_STORE_PORT"], std::to_string(job.a.store.port));
  EXPECT_EQ(m["MCI_STORE_HOSTED"], "1");
  EXPECT_EQ(m["MCI_JOB_TOKEN"], "tok");
  EXPECT_EQ(m["HOME"], "/root");
  EXPECT_EQ(m["PATH"], "/bin");
  EXPECT_EQ(m.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(m.count("PYTHONPATH"), 0u);
}

TEST(ChildEnv, SpeaksTorchrunsContract) {
  auto m = as_map(
      child_env({"TORCHELASTIC_USE_AGENT_STORE=True", "NCCL_ASYNC_ERROR_HANDLING=0"}, two_nodes(), 2, "tok", false));
  EXPECT_EQ(m["ROLE_RANK"], "5");
  EXPECT_EQ(m["ROLE_WORLD_SIZE"], "6");
  EXPECT_EQ(m["ROLE_NAME"], "default");
  EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(m["TORCHELASTIC_MAX_RESTARTS"], "0");
  EXPECT_EQ(m["TORCHELASTIC_RUN_ID"], "job7");
  EXPECT_EQ(m["TORCHELASTIC_USE_AGENT_STORE"], "False");  // an inherited True must not leak in
  EXPECT_EQ(m["TORCHELASTIC_ERROR_FILE"], "/tmp/errs/rank5/error.json");
  EXPECT_EQ(m["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_EQ(m["NCCL_ASYNC_ERROR_HANDLING"], "0");  // the user's choice stays
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
}

TEST(ChildEnv, TorchsStoreGoesToEtcdWithTheJobsStore) {
  Case j = two_nodes();
  auto m = as_map(child_env({"MCI_TORCH_STORE=mci"}, j, 0, "", false));
  EXPECT_EQ(m.count("MCI_TORCH_STORE"), 0u) << "mci's own store: torch's is MASTER_PORT's, an inherited value must not "
                                               "leak in";
  j.a.store.replicated = true;
  m = as_map(child_env({}, j, 0, "", false));
  EXPECT_EQ(m["MCI_TORCH_STORE"], "mci") << "on etcd, env:// meets on the relay (mci_torch/_torch_store.py)";
}

TEST(ChildEnv, AsyncErrorHandlingUnderTheNameTheProgramsTorchReads) {
  // torch 2.2 and later read TORCH_NCCL_ASYNC_ERROR_HANDLING and warn about
  // the old name on every rank; torch 1.13 reads only the old name.
  Case j = two_nodes();
  auto m = as_map(child_env({}, j, 0, "", false));
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(m.count("NCCL_ASYNC_ERROR_HANDLING"), 0u) << "not a Python program, or torch unknown: torch 2.x's name";
  j.a.torch = parse_torch_version("2.15.0+cu132");
  m = as_map(child_env({}, j, 0, "", false));
  EXPECT_EQ(m.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
  j.a.torch = parse_torch_version("1.13.0a0");
  m = as_map(child_env({}, j, 0, "", false));
  EXPECT_EQ(m["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  m = as_map(child_env({"TORCH_NCCL_ASYNC_ERROR_HANDLING=3"}, j, 0, "", false));
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
}

TEST(ChildEnv, RoleAddressSignalsAndLogFolderFromTheJob) {
  Case j = two_nodes();
  j.job.role = "trainer";
  j.a.program_addr = "10.0.0.9";
  j.job.stop_signals_text = "SIGUSR1";
  j.a.log_dir = "/logs/job7_abc/attempt_0";
  auto m = as_map(child_env({}, j, 2, "", false));
  EXPECT_EQ(m["ROLE_NAME"], "trainer");
  EXPECT_EQ(m["MASTER_ADDR"], "10.0.0.9") << "--local-addr of node 0";
  EXPECT_EQ(m["MCI_STORE_ADDR"], "node01") << "mcirun's store stays at --master_addr";
  EXPECT_EQ(m["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGUSR1");
  EXPECT_EQ(m["TORCHELASTIC_ERROR_FILE"], "/logs/job7_abc/attempt_0/2/error.json") << "by local rank, as torchrun";
}

TEST(ChildEnv, TellsTheProgramWhetherSurvivorsGoOn) {
  Case j = two_nodes();
  EXPECT_EQ(as_map(child_env({"MCI_ON_RANK_LOSS=continue"}, j, 0, "", false))["MCI_ON_RANK_LOSS"], "stop")
      << "the default, replacing an inherited value";
  j.job.on_rank_loss = OnRankLoss::go_on;
  EXPECT_EQ(as_map(child_env({}, j, 0, "", false))["MCI_ON_RANK_LOSS"], "continue");
  j.job.on_rank_loss = OnRankLoss::replace;
  EXPECT_EQ(as_map(child_env({}, j, 0, "", false))["MCI_ON_RANK_LOSS"], "replace");
}

// Only a replacement has MCI_REPLACEMENT, and it has the lost one's
// environment otherwise.
TEST(ChildEnv, OnlyAReplacementHasMciReplacement) {
  Case j = two_nodes();
  j.job.on_rank_loss = OnRankLoss::replace;
  const auto first = child_env({"MCI_REPLACEMENT=4", "KEEP=1"}, j, 1, "", false);
  EXPECT_EQ(as_map(first).count("MCI_REPLACEMENT"), 0u) << "an inherited one is removed";
  auto m = as_map(replacement_environment(first, 1));
  EXPECT_EQ(m["MCI_REPLACEMENT"], "1");
  EXPECT_EQ(m["RANK"], as_map(first)["RANK"]);
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["KEEP"], "1");
  const auto second = replacement_environment(replacement_environment(first, 1), 2);
  EXPECT_EQ(second.size(), first.size() + 1) << "one MCI_REPLACEMENT, not two";
  EXPECT_EQ(as_map(second)["MCI_REPLACEMENT"], "2");
}

TEST(ChildEnv, VirtualLocalRankShowsEachProcessItsOwnGpuAsDeviceZero) {
  Case j = two_nodes();
  j.job.virtual_local_rank = true;
  auto m = as_map(child_env({"CUDA_VISIBLE_DEVICES=4, 6,7"}, j, 1, "", false));
  EXPECT_EQ(m["LOCAL_RANK"], "0");
  EXPECT_EQ(m["RANK"], "4");
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "6");
  m = as_map(child_env({}, j, 2, "", false));
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "2") << "no list: the local rank's GPU";
  m = as_map(child_env({"HIP_VISIBLE_DEVICES=1,3", "CUDA_VISIBLE_DEVICES=0,1"}, j, 1, "", false));
  EXPECT_EQ(m["HIP_VISIBLE_DEVICES"], "3") << "HIP's list wins, as under torchrun";
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "3");
  j.job.virtual_local_rank = false;
  m = as_map(child_env({"CUDA_VISIBLE_DEVICES=4,6"}, j, 1, "", false));
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "4,6");
}

TEST(ChildEnv, GlooInterfaceOnlyWhenTheUserChoseNone) {
  Case j = two_nodes();
  j.a.gloo_ifname = "veth0";
  EXPECT_EQ(as_map(child_env({}, j, 0, "", false))["GLOO_SOCKET_IFNAME"], "veth0");
  EXPECT_EQ(as_map(child_env({"GLOO_SOCKET_IFNAME=ib0"}, j, 0, "", false))["GLOO_SOCKET_IFNAME"], "ib0");
  EXPECT_EQ(as_map(child_env({}, two_nodes(), 0, "", false)).count("GLOO_SOCKET_IFNAME"), 0u);
}

TEST(ChildEnv, PutsThePythonPackageFirstOnPythonpath) {
  EXPECT_EQ(as_map(child_env({"PYTHONPATH=/mine"}, two_nodes(), 0, "", false, "/opt/mci/py"))["PYTHONPATH"],
            "/opt/mci/py:/mine");
  EXPECT_EQ(as_map(child_env({}, two_nodes(), 0, "", false, "/opt/mci/py"))["PYTHONPATH"], "/opt/mci/py");
  EXPECT_EQ(as_map(child_env({"PYTHONPATH=/mine"}, two_nodes(), 0, "", false))["PYTHONPATH"], "/mine");
}

TEST(ChildEnv, ReplacesInheritedValuesAndDropsAnEmptyToken) {
  const Case job = two_nodes();
  auto m = as_map(
      child_env({"RANK=9", "MASTER_PORT=1", "MCI_STORE_HOSTED=0", "MCI_JOB_TOKEN=old", "OMP_NUM_THREADS=8", "X=a=b"},
                job, 0, "", true));
  EXPECT_EQ(m["RANK"], "3");
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(job.a.program_port));
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
