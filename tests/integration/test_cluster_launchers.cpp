// The lab and mci-perf started by the launchers clusters have, as users type
// them: srun and mpirun with nothing exported by hand. Each test needs its
// launcher (Open MPI's mpirun; a running Slurm for srun, e.g. the one
// .ci/run starts) and skips, saying why, where it is missing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "mci/init.hpp"
#include "support/ports.hpp"
#include "support/sanitizers.hpp"
#include "support/scenario.hpp"
#include "support/spawn.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Runs a shell command line; true when it exits 0.
bool runs(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// What a launched job printed and how it ended.
struct Launched {
  ExitStatus status;
  std::string out;
};

Launched launch(const std::vector<std::string>& argv, std::map<std::string, std::string> env = {}) {
  // Nothing of an outer job leaks in: the launcher alone says who is who,
  // and where the store is. The port is one the OS says is free (the
  // launcher-derived ports are unit-tested in test_job_coordinates).
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MCI_STORE_HOSTED"}) {
    env.emplace(v, "\x01");
  }
  env.emplace("MASTER_PORT", std::to_string(free_port()));
  env.emplace("MCI_JOB_TOKEN", "cluster-test-token");  // emplace: a test's own value wins
  // Through the shell, which finds the launcher on PATH.
  std::vector<std::string> sh{"/bin/sh", "-c", "exec \"$0\" \"$@\""};
  sh.insert(sh.end(), argv.begin(), argv.end());
  Spawner s;
  s.spawn(sh, env);
  Launched l;
  l.status = s.wait(0, 120s);
  l.out = s.child(0).output();
  return l;
}

void expect_lab_ran(const Launched& l) {
  EXPECT_TRUE(l.status.exited && l.status.code == 0) << l.out;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(has(l.out, "RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) + " WORLD_SIZE=2"))
        << l.out;
    EXPECT_TRUE(has(l.out, "moyenne " + std::to_string(r) + " [3.0, 5.0]")) << l.out;
    EXPECT_TRUE(has(l.out, "gradient " + std::to_string(r) + " [[0.5, 1.5]]")) << l.out;
  }
}

bool slurm_is_up() { return runs("command -v srun") && runs("timeout 10 sinfo -h"); }

std::vector<std::string> mpirun(int n) {
  std::vector<std::string> a{"mpirun", "--oversubscribe", "-np", std::to_string(n)};
  if (::geteuid() == 0) a.insert(a.begin() + 1, "--allow-run-as-root");
  return a;
}

TEST(Srun, TheLabRunsUnderBareSrun) {
  if (!slurm_is_up()) GTEST_SKIP() << "no running Slurm here (srun and a responding sinfo are needed)";
  expect_lab_ran(launch({"srun", "--ntasks=2", built("labo")}));
}

TEST(Srun, TheLabRunsUnderSrunWithPmix) {
  if (!slurm_is_up()) GTEST_SKIP() << "no running Slurm here (srun and a responding sinfo are needed)";
  if (!runs("srun --mpi=list 2>&1 | grep -q pmix")) GTEST_SKIP() << "this Slurm has no PMIx plugin";
  expect_lab_ran(launch({"srun", "--ntasks=2", "--mpi=pmix", built("labo")}));
}

TEST(Srun, NcclWithoutAGpuGivesTheSeedsMessage) {
  if (!slurm_is_up()) GTEST_SKIP() << "no running Slurm here (srun and a responding sinfo are needed)";
  const auto l = launch({"srun", "--ntasks=2", built("labo")}, {{"MCI_BACKEND", "nccl"}, {"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_TRUE(l.status.exited && l.status.code != 0) << l.out;
  EXPECT_TRUE(has(l.out, "MCI_BACKEND=nccl demande un GPU visible.")) << l.out;
  EXPECT_FALSE(has(l.out, "RANK=0")) << l.out;
}

TEST(Srun, MciPerfRunsUnderBareSrun) {
  if (!slurm_is_up()) GTEST_SKIP() << "no running Slurm here (srun and a responding sinfo are needed)";
  const auto l = launch({"srun", "--ntasks=2", built("mci-perf"), "all_reduce", "-b", "8", "-e", "64K", "-f", "8"});
  EXPECT_TRUE(l.status.exited && l.status.code == 0) << l.out;
  EXPECT_TRUE(has(l.out, "ranks=2 ") && has(l.out, "wrong=0 status=OK")) << l.out;
}

TEST(Mpirun, TheLabRunsUnderMpirun) {
  if (!runs("command -v mpirun")) GTEST_SKIP() << "Open MPI's mpirun is not installed (apt-get install openmpi-bin)";
  auto argv = mpirun(2);
  argv.push_back(built("labo"));
  expect_lab_ran(launch(argv));
}

TEST(Mpirun, WithoutATokenRankZeroSaysSoOnce) {
  if (!runs("command -v mpirun")) GTEST_SKIP() << "Open MPI's mpirun is not installed (apt-get install openmpi-bin)";
  auto argv = mpirun(2);
  argv.push_back(built("labo"));
  const auto l = launch(argv, {{"MCI_JOB_TOKEN", "\x01"}});
  expect_lab_ran(l);
  const auto first = l.out.find("MCI_JOB_TOKEN is not set: this job's store and data connections are not");
  EXPECT_NE(first, std::string::npos) << l.out;
  EXPECT_EQ(l.out.find("MCI_JOB_TOKEN is not set", first + 1), std::string::npos) << "said once\n" << l.out;
}

TEST(Mpirun, MciPerfRunsUnderMpirun) {
  if (!runs("command -v mpirun")) GTEST_SKIP() << "Open MPI's mpirun is not installed (apt-get install openmpi-bin)";
  auto argv = mpirun(2);
  for (const char* a : {"all_reduce", "-b", "8", "-e", "64K", "-f", "8"}) argv.push_back(a);
  argv.insert(argv.end() - 7, built("mci-perf"));
  const auto l = launch(argv);
  EXPECT_TRUE(l.status.exited && l.status.code == 0) << l.out;
  EXPECT_TRUE(has(l.out, "ranks=2 ") && has(l.out, "wrong=0 status=OK")) << l.out;
}

// The mpi backend: the job is mpirun's, init reads its variables, every
// collective goes through MPI. The scenarios are the cpu backend's.
void skip_without_mpi_backend() {
  if (!runs("command -v mpirun")) GTEST_SKIP() << "Open MPI's mpirun is not installed (apt-get install openmpi-bin)";
  if (!backend_available("mpi")) GTEST_SKIP() << "this build has no mpi backend (apt-get install libopenmpi-dev)";
}

Launched mpi_scenario(int n, const std::string& scenario, std::map<std::string, std::string> env = {}) {
  auto argv = mpirun(n);
  for (const auto& a : scenario_command(scenario)) argv.push_back(a);
  env["MCI_TEST_BACKEND"] = "mpi";
  if (kAddressSanitizer) {
    // Open MPI keeps allocations until exit in components it unloads at
    // exit, where LeakSanitizer sees them without a stack to suppress by:
    // the MPI ranks are checked for memory errors, not leaks (mci's code is
    // checked for leaks by every other test).
    const char* asan = std::getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan ? asan : "") + ":detect_leaks=0";
  }
  // Ranks outnumber cores: MPI's own waits must give the core away.
  env["OMPI_MCA_mpi_yield_when_idle"] = "1";
  return launch(argv, env);
}

TEST(MpiBackend, EveryCollectiveEveryDtypeOnOneToFourRanks) {
  skip_without_mpi_backend();
  for (int n = 1; n <= 4; ++n) {
    const auto l = mpi_scenario(n, n <= 3 ? "matrix" : "matrix_quick");
    EXPECT_TRUE(l.status.exited && l.status.code == 0) << n << " ranks\n" << l.out;
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(has(l.out, "rank " + std::to_string(r) + " matrix done: 0 failures")) << n << " ranks\n" << l.out;
    }
    EXPECT_TRUE(has(l.out, "all_reduce=library")) << l.out;
  }
}

TEST(MpiBackend, AsyncCallsAndPointToPoint) {
  skip_without_mpi_backend();
  for (const char* scenario : {"async", "p2p_tags", "p2p_exchange"}) {
    const auto l = mpi_scenario(scenario == std::string("p2p_tags") ? 3 : 2, scenario);
    EXPECT_TRUE(l.status.exited && l.status.code == 0) << scenario << "\n" << l.out;
  }
}

TEST(MpiBackend, ARankThatNeverArrivesIsATimeoutWithTheHangReport) {
  skip_without_mpi_backend();
  const auto l = mpi_scenario(2, "timeout", {{"MCI_TEST_TIMEOUT_MS", "1500"}, {"MCI_TEST_SLEEP_MS", "4000"}});
  EXPECT_TRUE(has(l.out, "Timed out waiting 1500ms for all_reduce #1")) << l.out;
  EXPECT_TRUE(has(l.out, "on backend mpi")) << l.out;
  EXPECT_TRUE(has(l.out, "rank 1: never entered all_reduce #1")) << l.out;
}

TEST(MpiBackend, AGroupThatIsNotTheMpiJobIsRefused) {
  skip_without_mpi_backend();
  // RANK exported by hand, the reverse of mpirun's numbering (two app
  // contexts: MPI rank 0 gets RANK=1, MPI rank 1 gets RANK=0).
  std::vector<std::string> argv = mpirun(1);
  for (int rank : {1, 0}) {
    if (rank == 0) argv.insert(argv.end(), {":", "-np", "1"});
    argv.insert(argv.end(), {"-x", "RANK=" + std::to_string(rank), "-x", "WORLD_SIZE=2"});
    for (const auto& a : scenario_command("init")) argv.push_back(a);
  }
  const auto l = launch(argv, {{"MCI_TEST_BACKEND", "mpi"}, {"MCI_TEST_TIMEOUT_MS", "20000"}});
  EXPECT_FALSE(l.status.exited && l.status.code == 0) << l.out;
  EXPECT_TRUE(has(l.out,
                  "backend 'mpi' needs the group to be the MPI job, rank for rank: MPI says this process is "
                  "rank 0 of 2, the group says rank 1 of 2"))
      << l.out;
}

}  // namespace
}  // namespace mci::test
