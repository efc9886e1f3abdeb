// env:// coordinates from every launcher, every precedence and every
// malformed case, with a fixed environment.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "group/job_coordinates.hpp"
#include "mci/errors.hpp"
#include "support/ports.hpp"

namespace mci {
namespace {

using Env = std::map<std::string, std::string>;

std::string error_of(const Env& e) {
  try {
    job_coordinates(fixed_env(e));
  } catch (const ConfigError& err) {
    return err.what();
  }
  return "no error";
}

// srun --ntasks=4 --ntasks-per-node=2 over node3 and node4, this task on node3.
Env slurm_step(int procid, int localid) {
  return {{"SLURM_JOB_ID", "1234"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_LOCALID", std::to_string(localid)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_NODEID", "0"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_STEP_NODELIST", "node[3-4]"}};
}

// Nothing listens in these tests; the ports are still ones the OS says are free.
TEST(JobCoordinates, ExplicitVariablesAsTheLauncherSetsThem) {
  const int port = test::free_port();
  const auto c = job_coordinates(fixed_env({{"RANK", "1"},
                                            {"WORLD_SIZE", "2"},
                                            {"LOCAL_RANK", "0"},
                                            {"LOCAL_WORLD_SIZE", "1"},
                                            {"MASTER_ADDR", "h0"},
                                            {"MASTER_PORT", std::to_string(port)}}));
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world, 2);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world, 1);
  EXPECT_EQ(c.host, "h0");
  EXPECT_EQ(c.port, port);
  EXPECT_EQ(c.source, "RANK/WORLD_SIZE");
}

// Under mcirun the program keeps MASTER_* (torch binds MASTER_PORT), and
// mci reaches mcirun's store through variables of its own.
TEST(JobCoordinates, McirunsStoreVariablesComeBeforeMasterPort) {
  const int store = test::free_port();
  const int program = test::free_port();
  Env e{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "h0"},
        {"MASTER_PORT", std::to_string(program)},
        {"MCI_STORE_ADDR", "h1"},
        {"MCI_STORE_PORT", std::to_string(store)}};
  auto c = job_coordinates(fixed_env(e));
  EXPECT_EQ(c.host, "h1");
  EXPECT_EQ(c.port, store);
  e["MCI_STORE_PORT"] = "70000";
  EXPECT_NE(error_of(e).find("MCI_STORE_PORT=70000 is not a TCP port"), std::string::npos) << error_of(e);
  e.erase("MCI_STORE_PORT");  // half set: MASTER_* as before
  c = job_coordinates(fixed_env(e));
  EXPECT_EQ(c.host, "h0");
  EXPECT_EQ(c.port, program);
}

TEST(JobCoordinates, ASlurmStepGivesRanksTheFirstNodeAndAPortOfItsJobAndStep) {
  const auto c = job_coordinates(fixed_env(slurm_step(1, 1)));
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world, 4);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world, 2);
  EXPECT_EQ(c.host, "node3");
  EXPECT_EQ(c.port, slurm_store_port(1234, 0));
  EXPECT_EQ(c.source, "Slurm");
  // Every rank of the step computes the same port; another step another.
  EXPECT_EQ(job_coordinates(fixed_env(slurm_step(3, 1))).port, c.port);
  auto next = slurm_step(0, 0);
  next["SLURM_STEP_ID"] = "1";
  EXPECT_NE(job_coordinates(fixed_env(next)).port, c.port);
  EXPECT_GE(c.port, kDerivedPortBase);
  EXPECT_LT(c.port, kDerivedPortBase + kDerivedPortSpan);
}

TEST(JobCoordinates, ExplicitVariablesWinOverTheLauncherOneByOne) {
  auto e = slurm_step(1, 1);
  e["MASTER_ADDR"] = "login7";
  const int port = test::free_port();
  e["MASTER_PORT"] = std::to_string(port);
  e["LOCAL_RANK"] = "0";
  const auto c = job_coordinates(fixed_env(e));
  EXPECT_EQ(c.host, "login7");
  EXPECT_EQ(c.port, port);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.rank, 1);
  e["RANK"] = "3";
  e["WORLD_SIZE"] = "4";
  EXPECT_EQ(job_coordinates(fixed_env(e)).rank, 3);
}

TEST(JobCoordinates, AnSbatchBatchShellIsNotARank) {
  const std::string m = error_of({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_NE(m.find("environment variable RANK expected, but not set"), std::string::npos) << m;
  EXPECT_NE(m.find("sbatch script's batch shell"), std::string::npos) << m;
  EXPECT_NE(m.find("start the ranks with srun"), std::string::npos) << m;
}

TEST(JobCoordinates, HalfSetLaunchersAreRefusedByName) {
  std::string m = error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}});
  EXPECT_NE(m.find("SLURM_PROCID is set but SLURM_NTASKS is not, so this is not a complete Slurm environment"),
            std::string::npos)
      << m;
  m = error_of({{"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_NE(m.find("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"), std::string::npos) << m;
  m = error_of({{"PMI_SIZE", "2"}});
  EXPECT_NE(m.find("PMI_SIZE is set but PMI_RANK is not"), std::string::npos) << m;
  m = error_of({{"PMIX_RANK", "1"}});
  EXPECT_NE(m.find("PMIX_RANK is set but no launcher variable gives the number of processes"), std::string::npos) << m;
  m = error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(m.find("SLURM_PROCID is 'x', which is not an integer"), std::string::npos) << m;
}

TEST(JobCoordinates, ARankOutsideTheLaunchersWorldNamesItsVariables) {
  const std::string m = error_of(slurm_step(4, 0));
  EXPECT_NE(m.find("SLURM_PROCID=4 is outside [0, SLURM_STEP_NUM_TASKS=4) (set by Slurm)"), std::string::npos) << m;
}

TEST(JobCoordinates, OpenMpiOnOneNodeNeedsNoAddress) {
  Env e{{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"PMIX_RANK", "1"},
        {"PMIX_NAMESPACE", "prterun-vm-42@1"}};
  const auto c = job_coordinates(fixed_env(e));
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world, 2);
  EXPECT_EQ(c.local_world, 2);
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.source, "Open MPI");
  // Rank 0 of the same launch meets it on the same port.
  e["OMPI_COMM_WORLD_RANK"] = e["OMPI_COMM_WORLD_LOCAL_RANK"] = e["PMIX_RANK"] = "0";
  EXPECT_EQ(job_coordinates(fixed_env(e)).port, c.port);
}

TEST(JobCoordinates, OpenMpiAcrossNodesAsksForTheAddress) {
  Env e{{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
        {"PMIX_NAMESPACE", "prterun-vm-42@1"}};
  std::string m = error_of(e);
  EXPECT_NE(m.find("environment variable MASTER_ADDR expected, but not set"), std::string::npos) << m;
  EXPECT_NE(m.find("mpirun -x MASTER_ADDR=$(hostname)"), std::string::npos) << m;
  e["MASTER_ADDR"] = "node1";
  e["MASTER_PORT"] = std::to_string(test::free_port());
  EXPECT_EQ(job_coordinates(fixed_env(e)).host, "node1");
}

TEST(JobCoordinates, MpirunInsideASlurmAllocationFollowsMpirun) {
  // mpirun's daemons run as a Slurm step: Slurm's numbers are theirs.
  Env e{{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"SLURM_JOB_ID", "9"},
        {"SLURM_STEP_ID", "0"},
        {"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "2"},
        {"MASTER_ADDR", "node0"},
        {"MASTER_PORT", std::to_string(test::free_port())}};
  const auto c = job_coordinates(fixed_env(e));
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world, 4);
  EXPECT_EQ(c.source, "Open MPI");
}

TEST(JobCoordinates, SrunWithPmixOrPmi2AgreesWithSlurmOrIsRefused) {
  auto e = slurm_step(2, 0);
  e["PMIX_RANK"] = "2";
  EXPECT_EQ(job_coordinates(fixed_env(e)).rank, 2);
  e["PMIX_RANK"] = "1";
  std::string m = error_of(e);
  EXPECT_NE(m.find("two launchers disagree about this process: Slurm says rank 2 of 4 (SLURM_PROCID, "
                   "SLURM_STEP_NUM_TASKS), PMIx says rank 1"),
            std::string::npos)
      << m;
  e.erase("PMIX_RANK");
  e["PMI_RANK"] = "2";
  e["PMI_SIZE"] = "3";
  m = error_of(e);
  EXPECT_NE(m.find("MPICH/Hydra says rank 2 of 3"), std::string::npos) << m;
}

TEST(JobCoordinates, MpichHydraOnOneNode) {
  const auto c = job_coordinates(fixed_env({{"PMI_RANK", "0"},
                                            {"PMI_SIZE", "3"},
                                            {"MPI_LOCALRANKID", "0"},
                                            {"MPI_LOCALNRANKS", "3"},
                                            {"PMI_KVSNAME", "kvs_811_0"}}));
  EXPECT_EQ(c.world, 3);
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.source, "MPICH/Hydra");
}

TEST(JobCoordinates, NothingSetListsWhatWasLookedFor) {
  const std::string m = error_of({});
  EXPECT_NE(m.find("Error initializing mci using env:// rendezvous: environment variable RANK expected, but not "
                   "set. Start the program with a launcher (mcirun --nproc_per_node=N prog, or srun), or export RANK."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("Looked for: RANK and WORLD_SIZE; a Slurm job step (SLURM_PROCID, SLURM_NTASKS); Open MPI"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace mci
