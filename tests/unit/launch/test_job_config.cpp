#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>

#include <fmt/format.h>

#include "launch/config/devices.hpp"
#include "launch/config/job_config.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

using Env = std::map<std::string, std::string>;

CliArgs args_for(std::vector<std::string> words) {
  // The program goes last; tests that are about it give one ("/...").
  if (words.empty() || words.back().rfind('/', 0) != 0) words.push_back("/bin/true");
  words.insert(words.begin(), "mcirun");
  return parse_cli(words).args.value();
}

JobConfig job(std::vector<std::string> words, Env env = {}, const std::string& dev = "/nonexistent") {
  return resolve_job(args_for(std::move(words)), fixed_env(std::move(env)), dev);
}

// The message of the error resolve_job throws (of type E), or "no error".
template <class E = UsageError>
std::string error(std::vector<std::string> words, Env env = {}) {
  try {
    job(std::move(words), std::move(env));
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no error";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(JobConfig, DefaultsAreTorchrunsSingleNode) {
  JobConfig c = job({"/bin/true"});
  EXPECT_EQ(c.nproc_per_node, 1);
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_EQ(c.node_rank, 0);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.master_port, 29500);
  EXPECT_EQ(c.grace, std::chrono::milliseconds(3000));
  EXPECT_FALSE(c.prefix);
  EXPECT_EQ(c.program.path, "/bin/true");
  EXPECT_TRUE(c.hosts_store());
}

TEST(JobConfig, MonitorAddresses) {
  EXPECT_FALSE(job({}).monitor);
  auto m = job({"--monitor"}).monitor;
  ASSERT_TRUE(m);
  EXPECT_EQ(m->host, "127.0.0.1");
  EXPECT_EQ(m->port, 0);
  EXPECT_FALSE(m->open);
  m = job({"--monitor=8265"}).monitor;
  EXPECT_EQ(m->port, 8265);
  m = job({"--monitor=0.0.0.0:9000"}, {{"MCI_MONITOR_OPEN", "1"}}).monitor;
  EXPECT_EQ(m->host, "0.0.0.0");
  EXPECT_EQ(m->port, 9000);
  EXPECT_TRUE(m->open);
  m = job({"--monitor=[::1]:0"}).monitor;
  EXPECT_EQ(m->host, "::1");
  // The environment twin, which the flag overrides; 0, off or empty: none.
  EXPECT_EQ(job({}, {{"MCI_MONITOR", "7000"}}).monitor->port, 7000);
  EXPECT_EQ(job({"--monitor=7001"}, {{"MCI_MONITOR", "7000"}}).monitor->port, 7001);
  for (const char* off : {"0", "off", ""}) EXPECT_FALSE(job({}, {{"MCI_MONITOR", off}}).monitor) << off;
  expect_has(error({"--monitor=host:port"}), "--monitor");
  expect_has(error({"--monitor=::1:80"}), "IPv6 address in brackets");
  expect_has(error({}, {{"MCI_MONITOR", "h:99999"}}), "MCI_MONITOR");
}

TEST(JobConfig, BindModes) {
  EXPECT_EQ(job({}).bind, topo::BindMode::none);
  EXPECT_EQ(job({"--bind", "numa"}).bind, topo::BindMode::numa);
  EXPECT_EQ(job({"--bind=core"}).bind, topo::BindMode::core);
  expect_has(error({"--bind=socket"}), "--bind=socket: use none, numa");
}

TEST(JobConfig, RanksAreNodeRankTimesNprocPlusLocalRank) {
  JobConfig c = job({"--nnodes=3", "--node_rank=2", "--nproc_per_node=4", "--master_addr=h"});
  EXPECT_EQ(c.world_size(), 12);
  EXPECT_EQ(c.rank_of(0), 8);
  EXPECT_EQ(c.rank_of(3), 11);
  EXPECT_FALSE(c.hosts_store());
}

TEST(JobConfig, NprocNumbersAndNames) {
  EXPECT_EQ(job({"--nproc_per_node=7"}).nproc_per_node, 7);
  EXPECT_EQ(job({"--nproc_per_node=cpu"}).nproc_per_node, usable_cpus());
  EXPECT_GE(usable_cpus(), 1);
  for (const char* bad : {"0", "-1", "two", "1.5", "gpus"}) {
    std::string m = error({std::string("--nproc_per_node=") + bad});
    expect_has(m, "--nproc_per_node='" + std::string(bad) + "' is not valid");
    expect_has(m, "cpu, gpu or auto");
  }
}

TEST(JobConfig, GpuCountFollowsCudaVisibleDevicesLikeCuda) {
  EXPECT_EQ(job({"--nproc_per_node=gpu"}, {{"CUDA_VISIBLE_DEVICES", "0,1,2"}}).nproc_per_node, 3);
  EXPECT_EQ(job({"--nproc_per_node=gpu"}, {{"CUDA_VISIBLE_DEVICES", "3"}}).nproc_per_node, 1);
  // CUDA stops at the first entry it cannot read.
  EXPECT_EQ(job({"--nproc_per_node=gpu"}, {{"CUDA_VISIBLE_DEVICES", "0,1,-1,2"}}).nproc_per_node, 2);
  EXPECT_EQ(job({"--nproc_per_node=gpu"}, {{"CUDA_VISIBLE_DEVICES", "GPU-abc,MIG-def"}}).nproc_per_node, 2);
  std::string m = error<ConfigError>({"--nproc_per_node=gpu"}, {{"CUDA_VISIBLE_DEVICES", ""}});
  expect_has(m, "no GPU is visible (CUDA_VISIBLE_DEVICES='')");
  expect_has(m, "give a number of processes, or cpu");
  // auto: the GPUs when there are some, the CPUs otherwise.
  EXPECT_EQ(job({"--nproc_per_node=auto"}, {{"CUDA_VISIBLE_DEVICES", "0,1"}}).nproc_per_node, 2);
  EXPECT_EQ(job({"--nproc_per_node=auto"}, {{"CUDA_VISIBLE_DEVICES", ""}}).nproc_per_node, usable_cpus());
}

TEST(JobConfig, GpuCountFromDeviceFilesWithoutCudaVisibleDevices) {
  test::TempDir dev;
  EXPECT_EQ(visible_gpus(fixed_env({}), dev.path()), 0);
  std::string m = error<ConfigError>({"--nproc_per_node=gpu"});
  expect_has(m, "no /nonexistent/nvidiaN device");
  for (const char* f : {"nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm", "nvidia-caps"}) dev.file(f);
  EXPECT_EQ(visible_gpus(fixed_env({}), dev.path()), 3);
  EXPECT_EQ(job({"--nproc_per_node=gpu"}, {}, dev.path()).nproc_per_node, 3);
}

TEST(JobConfig, RdzvEndpointSetsTheStoreAddress) {
  JobConfig c = job({"--rdzv_endpoint=node07:1234"});
  EXPECT_EQ(c.master_addr, "node07");
  EXPECT_EQ(c.master_port, 1234);
  c = job({"--rdzv-endpoint", "node07"});
  EXPECT_EQ(c.master_port, 29400);
  c = job({"--rdzv_endpoint=[::1]:5000"});
  EXPECT_EQ(c.master_addr, "::1");
  EXPECT_EQ(c.master_port, 5000);
  EXPECT_EQ(parse_endpoint("[fe80::1]", 7), (std::pair<std::string, int>{"fe80::1", 7}));
  expect_has(error({"--rdzv_endpoint=h:99999"}), "is not a TCP port");
  expect_has(error({"--rdzv_endpoint=h:"}), "is not a TCP port");
  expect_has(error({"--rdzv_endpoint=:80"}), "no host");
  expect_has(error({"--rdzv_endpoint=::1:80"}), "IPv6 address in brackets");
  expect_has(error({"--rdzv_endpoint=[::1"}), "missing ']'");
  expect_has(error({"--rdzv_endpoint=h:1", "--master_port=2"}), "give one or the other");
}

TEST(JobConfig, MasterAddressAndPort) {
  JobConfig c = job({"--master_addr=10.0.0.5", "--master-port=29531"});
  EXPECT_EQ(c.master_addr, "10.0.0.5");
  EXPECT_EQ(c.master_port, 29531);
  for (const char* bad : {"0", "65536", "http", "-5"}) {
    std::string m = error({std::string("--master_port=") + bad});
    expect_has(m, "is not a TCP port: use a number from 1 to 65535");
  }
  expect_has(error({"--master_addr", ""}), "--master_addr is empty");
}

TEST(JobConfig, StandalonePicksItsOwnPortOnOneNode) {
  JobConfig c = job({"--standalone", "--nproc_per_node=2"});
  EXPECT_TRUE(c.standalone);
  EXPECT_EQ(c.master_port, 0);  // the OS picks it when the store binds
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_EQ(job({"--standalone", "--nnodes=1"}).nnodes, 1);
  expect_has(error({"--standalone", "--nnodes=2"}), "--standalone runs one node, but --nnodes=2");
  expect_has(error({"--standalone", "--master_port=5"}), "drop --master_addr, --master_port");
  expect_has(error({"--standalone", "--rdzv_endpoint=h:5"}), "--standalone picks a free port");
  expect_has(error({"--standalone", "--node_rank=1"}), "--node_rank is 0");
}

TEST(JobConfig, NodesAndNodeRankMustAgree) {
  expect_has(error({"--nnodes=2"}), "--nnodes=2 needs --node_rank on every node");
  expect_has(error({"--nnodes=2", "--node_rank=2"}), "--node_rank=2 is not below --nnodes=2");
  expect_has(error({"--node_rank=1"}), "--node_rank=1 is not below --nnodes=1");
  expect_has(error({"--nnodes=0"}), "--nnodes='0' is not valid");
  expect_has(error({"--nnodes=2", "--node_rank=-1"}), "--node_rank='-1' is not valid");
  EXPECT_EQ(job({"--nnodes=2:2", "--node_rank=1"}).nnodes, 2);
  EXPECT_FALSE(job({"--nnodes=2:2", "--node_rank=1"}).elastic);
}

// --nnodes MIN:MAX, torchrun's elastic range: no --node_rank needed; 0 says
// "hosts the store", another value "does not" (torchrun's c10d ignores it).
TEST(JobConfig, AnElasticRangeIsKeptAndNodeRankOnlySaysWhoHostsTheStore) {
  JobConfig c = job({"--nnodes=1:4", "--nproc_per_node=2"});
  ASSERT_TRUE(c.elastic);
  EXPECT_EQ(c.elastic->min_nodes, 1);
  EXPECT_EQ(c.elastic->max_nodes, 4);
  EXPECT_EQ(c.nnodes, 4);            // until the first attempt says how many came
  EXPECT_FALSE(c.elastic->is_host);  // decided by binding the store's address
  EXPECT_TRUE(c.notices.empty());
  c = job({"--nnodes=1:4", "--node_rank=3", "--master_addr=h"});
  EXPECT_EQ(c.elastic->is_host, false);
  EXPECT_EQ(c.node_rank, 0);
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "--node_rank=3 only says that this node does not host the store");
  EXPECT_EQ(job({"--nnodes=1:4", "--node_rank=0"}).elastic->is_host, true);
  EXPECT_EQ(job({"--nnodes=1:4", "--rdzv_conf=is_host=false"}).elastic->is_host, false);
  expect_has(error({"--nnodes=1:4", "--node_rank=0", "--rdzv_conf=is_host=no"}), "disagree");
  expect_has(error({"--nnodes=3:2"}), "--nnodes='3:2': the minimum number of nodes is above the maximum");
  expect_has(error({"--nnodes=0:2"}), "--nnodes='0' is not valid");
  expect_has(error({"--nnodes=1:x"}), "or a range MIN:MAX");
  expect_has(error({"--standalone", "--nnodes=1:2"}), "--standalone runs one node");
  c = job({"--nnodes=2:3", "--rdzv_conf=last_call_timeout=0,keep_alive_interval=2,keep_alive_max_attempt=4"});
  EXPECT_EQ(c.elastic->last_call, std::chrono::seconds(0));
  EXPECT_EQ(c.elastic->lost_after(), std::chrono::seconds(8));
  expect_has(error({"--nnodes=2:3", "--rdzv_conf=keep_alive_interval=0"}), "keep_alive_interval=0 is not valid");
  expect_has(job({"--nnodes=1:2", "--rdzv_backend=static"}).notices.at(0), "runs the range elastically");
}

TEST(JobConfig, GraceAndTorchrunLeftovers) {
  EXPECT_EQ(job({"--grace=0.25"}).grace, std::chrono::milliseconds(250));
  EXPECT_EQ(job({"--grace=0"}).grace, std::chrono::milliseconds(0));
  for (const char* bad : {"-1", "abc", "nan", "inf", "1s"}) {
    expect_has(error({std::string("--grace=") + bad}), "seconds between SIGTERM and SIGKILL");
  }
  EXPECT_EQ(job({"--max_restarts=3"}).max_restarts, 3);
  EXPECT_EQ(job({"--max-restarts=0"}).max_restarts, 0);
  EXPECT_EQ(job({}).max_restarts, 0) << "a failure ends the job unless asked";
  for (const char* bad : {"-1", "many", "2.5"}) {
    expect_has(error({std::string("--max-restarts=") + bad}), "is not valid: use a number of restarts, 0 or more");
  }
  expect_has(error({"--rdzv_backend=zookeeper"}), "use static or c10d");
  EXPECT_NO_THROW(job({"--rdzv_backend=static", "--rdzv_id=abc", "--max_restarts=0", "--monitor_interval=5"}));
  expect_has(error({"--monitor_interval=soon"}), "--monitor_interval='soon' is not valid: give seconds");
  EXPECT_TRUE(job({}).notices.empty()) << "no notice when no torchrun leftover is given";
}

// --rdzv_backend=etcd (torchrun's etcd-v2 too): the members from
// --rdzv_endpoint, no store address, and what cannot be done refused with
// what to do instead.
TEST(JobConfig, TheStoreOnEtcdTakesItsMembersFromTheEndpoint) {
  const JobConfig c =
      job({"--nnodes=3", "--node_rank=1", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=h1:2379,http://h2,[fd00::3]:2400",
           "--rdzv_id=run7", "--rdzv_conf=read_timeout=9,protocol=http"});
  ASSERT_TRUE(c.etcd);
  EXPECT_EQ(c.etcd->endpoints, (std::vector<std::string>{"h1:2379", "h2:2379", "[fd00::3]:2400"}));
  EXPECT_EQ(c.etcd->read_timeout, std::chrono::seconds(9));
  EXPECT_EQ(c.run_id, "run7");
  EXPECT_EQ(c.master_addr, "") << "node 0 gives the program its own address";
  EXPECT_FALSE(c.hosts_store()) << "no node hosts the store";
  for (const auto& n : c.notices) EXPECT_EQ(n.find("read_timeout"), std::string::npos) << n;
  EXPECT_EQ(job({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1", "--master_addr=n0"})
                .master_addr,
            "n0");
  EXPECT_EQ(job({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1"},
                {{"MCI_ETCD_LEASE_TTL", "3"}})
                .etcd->lease_ttl,
            std::chrono::seconds(3));

  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd"}), "needs --rdzv_endpoint=HOST1:2379");
  expect_has(error({"--standalone", "--rdzv_backend=etcd", "--rdzv_endpoint=h1"}), "a one-node job needs no etcd");
  // An elastic range on etcd: no node hosts the store, every node alike
  // (--node_rank only gets a notice), no MASTER_ADDR needed.
  const JobConfig elastic = job({"--nnodes=1:3", "--rdzv_backend=etcd", "--rdzv_endpoint=h1"});
  ASSERT_TRUE(elastic.elastic);
  EXPECT_EQ(elastic.elastic->min_nodes, 1);
  EXPECT_EQ(elastic.elastic->max_nodes, 3);
  EXPECT_FALSE(elastic.hosts_store());
  EXPECT_TRUE(elastic.master_addr.empty());
  const JobConfig ranked = job({"--nnodes=1:3", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1"});
  EXPECT_FALSE(ranked.hosts_store()) << "on etcd node 0 hosts nothing";
  ASSERT_FALSE(ranked.notices.empty());
  EXPECT_NE(ranked.notices.back().find("--node_rank=0 ignored: no node hosts the store"), std::string::npos)
      << ranked.notices.back();
  expect_has(error({"--nnodes=1:3", "--rdzv_backend=etcd", "--rdzv_endpoint=h1", "--monitor=0"}),
             "--monitor with an elastic --nnodes=1:3 on etcd is not built yet");
  // TLS: torchrun's keys, or https:// endpoints; and the legacy backend's etcd_prefix.
  const JobConfig tls = job({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1,h2:2400",
                             "--rdzv_conf=protocol=https,cacert=/ca.pem,cert=/c.pem,key=/c.key,etcd_prefix=/jobs/a"});
  EXPECT_TRUE(tls.etcd->https);
  EXPECT_EQ(tls.etcd->cacert, "/ca.pem");
  EXPECT_EQ(tls.etcd->cert, "/c.pem");
  EXPECT_EQ(tls.etcd->key, "/c.key");
  EXPECT_EQ(tls.etcd->prefix, "/jobs/a");
  for (const auto& n : tls.notices) EXPECT_EQ(n.find("cacert"), std::string::npos) << "not an unknown key: " << n;
  EXPECT_TRUE(
      job({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=https://h1:2379"}).etcd->https);
  EXPECT_FALSE(c.etcd->https);
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=http://h1,https://h2"}),
             "mix http and https");
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=https://h1",
                    "--rdzv_conf=protocol=http"}),
             "mix http and https");
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1",
                    "--rdzv_conf=protocol=ftp"}),
             "protocol=ftp is not valid: give http or https");
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1",
                    "--rdzv_conf=etcd_prefix=jobs/"}),
             "etcd_prefix=jobs/ is not valid");
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1",
                    "--rdzv_conf=read_timeout=0"}),
             "read_timeout=0 is not valid");
  expect_has(error({"--nnodes=2", "--node_rank=0", "--rdzv_backend=etcd", "--rdzv_endpoint=h1"},
                   {{"MCI_ETCD_LEASE_TTL", "0"}}),
             "MCI_ETCD_LEASE_TTL=0 is not valid");
}

TEST(JobConfig, OnRankLossStopsByDefaultAndRefusesWhatItCannotDo) {
  EXPECT_EQ(job({}).on_rank_loss, OnRankLoss::stop);
  EXPECT_EQ(job({"--on-rank-loss=stop"}).on_rank_loss, OnRankLoss::stop);
  EXPECT_EQ(job({"--on-rank-loss=continue"}).on_rank_loss, OnRankLoss::go_on);
  EXPECT_EQ(job({"--on_rank_loss", "continue"}).on_rank_loss, OnRankLoss::go_on);
  EXPECT_EQ(job({"--on-rank-loss=continue", "--max-restarts=0"}).on_rank_loss, OnRankLoss::go_on);
  EXPECT_EQ(job({"--on-rank-loss=stop", "--max-restarts=2"}).max_restarts, 2);
  for (const char* bad : {"Continue", "shrink", "restart"}) {
    const std::string e = error({std::string("--on-rank-loss=") + bad});
    expect_has(e, "is not valid: use stop");
    expect_has(e, ", continue (");
    expect_has(e, "or replace (");
  }
  expect_has(error({"--on-rank-loss=continue", "--max_restarts=1"}),
             "--on-rank-loss=continue and --max-restarts=1 are two answers to a lost rank");
  for (const char* policy : {"continue", "replace"}) {
    expect_has(error({std::string("--on-rank-loss=") + policy, "--nnodes=1:2", "--node_rank=0",
                      "--master_addr=127.0.0.1"}),
               fmt::format("--on-rank-loss={} with an elastic --nnodes=1:2 is not built yet", policy));
  }
}

// Under replace, --max-restarts caps each node's replacements and restarts
// nothing else.
TEST(JobConfig, OnRankLossReplaceTakesItsCapFromMaxRestarts) {
  const JobConfig dflt = job({"--on-rank-loss=replace"});
  EXPECT_EQ(dflt.on_rank_loss, OnRankLoss::replace);
  EXPECT_EQ(dflt.max_replacements, kDefaultMaxReplacements);
  EXPECT_FALSE(dflt.max_replacements_given);
  EXPECT_EQ(dflt.max_restarts, 0);
  for (const char* n : {"0", "1", "7"}) {
    const JobConfig c = job({"--on-rank-loss=replace", std::string("--max-restarts=") + n});
    EXPECT_EQ(c.max_replacements, std::stoi(n));
    EXPECT_TRUE(c.max_replacements_given);
    EXPECT_EQ(c.max_restarts, 0) << "no restart of the whole job";
  }
  EXPECT_EQ(job({"--max_restarts", "2", "--on_rank_loss", "replace"}).max_replacements, 2);
}

TEST(JobConfig, ShutdownTimeoutIsTorchrunsGrace) {
  EXPECT_EQ(job({}).grace, std::chrono::milliseconds(3000));
  EXPECT_EQ(job({"--shutdown-timeout=7"}).grace, std::chrono::milliseconds(7000));
  EXPECT_EQ(job({"--shutdown_timeout=7", "--grace=7"}).grace, std::chrono::milliseconds(7000));
  expect_has(error({"--shutdown-timeout=7", "--grace=1"}), "both say how long processes get to stop");
  EXPECT_EQ(job({}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "12"}}).grace, std::chrono::milliseconds(12000));
  EXPECT_EQ(job({"--grace=1"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "12"}}).grace, std::chrono::milliseconds(1000));
  expect_has(error({}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "x"}}), "TORCH_ELASTIC_SHUTDOWN_TIMEOUT='x' is not valid");
}

TEST(JobConfig, NumaBindingIsTorchrunsBind) {
  JobConfig c = job({"--numa-binding=node"});
  EXPECT_EQ(c.bind, topo::BindMode::numa);
  EXPECT_TRUE(c.notices.empty());
  EXPECT_EQ(job({"--numa_binding=exclusive"}).bind, topo::BindMode::core);
  c = job({"--numa-binding=socket"});
  EXPECT_EQ(c.bind, topo::BindMode::numa);
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "--numa-binding=socket pins each process to its GPU's NUMA node");
  c = job({"--numa-binding=core-complex"});
  EXPECT_EQ(c.bind, topo::BindMode::core);
  ASSERT_EQ(c.notices.size(), 1u);
  EXPECT_EQ(job({"--numa-binding=node", "--bind=numa"}).bind, topo::BindMode::numa);
  expect_has(error({"--numa-binding=node", "--bind=core"}), "pin the processes differently");
  expect_has(error({"--numa-binding=gpu"}), "use node, socket, exclusive or core-complex");
}

TEST(JobConfig, RdzvConfJoinTimeoutBoundsTheWaitForNodeZero) {
  EXPECT_EQ(job({}).join_timeout, std::chrono::minutes(10));
  EXPECT_EQ(job({"--rdzv-conf=join_timeout=30"}).join_timeout, std::chrono::seconds(30));
  EXPECT_EQ(job({"--rdzv_conf", "timeout=45"}).join_timeout, std::chrono::seconds(45));
  JobConfig c = job({"--rdzv_conf=read_timeout=60,join_timeout=20,is_host=1"});
  EXPECT_EQ(c.join_timeout, std::chrono::seconds(20));
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "--rdzv_conf: read_timeout, is_host ignored");
  expect_has(error({"--rdzv_conf=join_timeout"}), "write KEY=VALUE pairs");
  expect_has(error({"--rdzv_conf=join_timeout=soon"}), "join_timeout=soon is not valid: give whole seconds");
}

TEST(JobConfig, SignalsToHandleStopTheJobAndAlwaysIncludeTheStopSignals) {
  JobConfig c = job({});
  EXPECT_EQ(c.stop_signals, (std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT})) << "torchrun's default";
  EXPECT_EQ(c.stop_signals_text, "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  c = job({"--signals-to-handle=SIGUSR1, SIGTERM"});
  EXPECT_EQ(c.stop_signals, (std::vector<int>{SIGUSR1, SIGTERM, SIGINT, SIGHUP}));
  EXPECT_EQ(c.stop_signals_text, "SIGUSR1, SIGTERM");
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "leaves out SIGINT, SIGHUP: mcirun still stops the job on them");
  expect_has(error({"--signals-to-handle=USR1"}), "'USR1' is not a signal name");
  expect_has(error({"--signals-to-handle=SIGKILL"}), "SIGKILL cannot be one");
  expect_has(error({"--signals-to-handle=SIGCHLD"}), "SIGCHLD cannot be one");
}

TEST(JobConfig, StartMethodRoleAndLocalAddr) {
  EXPECT_TRUE(job({"--start-method=spawn"}).notices.empty()) << "what mcirun does anyway";
  JobConfig c = job({"--start-method=forkserver"});
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "--start_method=forkserver has no meaning here");
  expect_has(error({"--start-method=thread"}), "use spawn, fork or forkserver");
  EXPECT_EQ(job({}).role, "default");
  EXPECT_EQ(job({"--role=trainer"}).role, "trainer");
  EXPECT_FALSE(job({}).local_addr);
  EXPECT_EQ(job({"--local-addr=10.1.2.3"}).local_addr, "10.1.2.3");
  expect_has(error({"--local_addr", ""}), "--local_addr is empty");
  EXPECT_EQ(job({"--event-log-handler=null"}).notices.size(), 0u);
  EXPECT_EQ(job({"--event-log-handler=console"}).notices.size(), 1u);
  EXPECT_EQ(job({"--logs-specs=mine"}).notices.size(), 1u);
}

TEST(JobConfig, RunIdIsRdzvIdOrFreshForAStandaloneJob) {
  EXPECT_EQ(job({}).run_id, "none");
  EXPECT_EQ(job({"--rdzv_id=job7"}).run_id, "job7");
  EXPECT_EQ(job({"--standalone", "--rdzv_id=job7"}).run_id, "job7");
  const std::string a = job({"--standalone"}).run_id, b = job({"--standalone"}).run_id;
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u) << a;
  EXPECT_EQ(a[8], '-');
  EXPECT_EQ(a[14], '4') << "uuid4, as torchrun's --standalone: " << a;
}

TEST(JobConfig, LogOptions) {
  JobConfig c = job({"--log-dir=/tmp/x", "-r", "0:1", "-t", "2", "--local-ranks-filter=0",
                     "--log-line-prefix-template=${rank}:", "--duplicate-stdout-filters=a,,b"});
  EXPECT_EQ(c.logs.log_dir, "/tmp/x");
  EXPECT_EQ(c.logs.redirects.of(0), kStdOut);
  EXPECT_EQ(c.logs.tee.of(3), kStdErr);
  EXPECT_EQ(c.logs.console_ranks, std::set<int>{0});
  EXPECT_EQ(c.logs.prefix_template, "${rank}:");
  EXPECT_EQ(c.logs.stdout_filters, std::vector<std::string>{"a,b"});
  EXPECT_TRUE(c.notices.empty());
  EXPECT_FALSE(job({}).logs.wants_folder());
  EXPECT_TRUE(job({"-t", "1"}).logs.wants_folder()) << "-t without --log-dir: a folder mcirun makes";
  EXPECT_EQ(job({}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "$rank "}}).logs.prefix_template, "$rank ");
  c = job({"--duplicate-stderr-filters=x"});
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "none is tee'd: add -t 3");
  expect_has(error({"-r", "5"}), "--redirects='5' is not valid");
}

TEST(JobConfig, ModuleRunPathAndNoPythonCombineAsUnderTorchrun) {
  test::TempDir d;
  const std::string py = d.file("python3", "#!/bin/sh\n", 0755);
  const std::string script = d.file("train", "print(1)\n");
  const Env env{{"PATH", d.path()}};
  JobConfig c = resolve_job(parse_cli({"mcirun", "-m", "pkg.main", "--lr=1"}).args.value(), fixed_env(env));
  EXPECT_EQ(c.program.argv, (std::vector<std::string>{py, "-u", "-m", "pkg.main", "--lr=1"}));
  c = job({"--run-path", script}, env);
  EXPECT_EQ(c.program.argv, (std::vector<std::string>{py, "-u", script}));
  c = job({"--run-path", "--no-python", script}, env);
  EXPECT_EQ(c.program.argv, (std::vector<std::string>{py, "-u", script})) << "--run-path wins over --no-python";
  c = job({"--run-path", "-m", script}, env);
  EXPECT_EQ(c.program.argv, (std::vector<std::string>{py, "-u", script}));
  ASSERT_EQ(c.notices.size(), 1u);
  expect_has(c.notices[0], "--run-path wins over -m");
  expect_has(error({"-m", "--no-python", "pkg"}, env), "give one of them");
}

TEST(JobConfig, PetVariablesAreNamedInMessagesAndIgnoredUnderStandaloneForTheStore) {
  auto from_env = [](const Env& env, std::vector<std::string> words) {
    if (words.empty() || words.back().rfind('/', 0) != 0) words.push_back("/bin/true");
    words.insert(words.begin(), "mcirun");
    return resolve_job(parse_cli(words, fixed_env(env)).args.value(), fixed_env(env), "/nonexistent");
  };
  auto err = [&](const Env& env, std::vector<std::string> words) -> std::string {
    try {
      from_env(env, std::move(words));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  expect_has(err({{"PET_NNODES", "zero"}}, {}), "PET_NNODES='zero' is not valid");
  expect_has(err({{"PET_NPROC_PER_NODE", "x"}}, {}), "PET_NPROC_PER_NODE='x' is not valid");
  expect_has(err({{"PET_MASTER_PORT", "99999"}}, {}), "PET_MASTER_PORT='99999' is not a TCP port");
  EXPECT_EQ(from_env({{"PET_NPROC_PER_NODE", "3"}, {"PET_STANDALONE", "1"}}, {}).nproc_per_node, 3);
  JobConfig c = from_env({{"PET_MASTER_ADDR", "node01"}, {"PET_MASTER_PORT", "1234"}}, {"--standalone"});
  EXPECT_EQ(c.master_port, 0) << "--standalone picks its port";
  ASSERT_EQ(c.notices.size(), 2u);
  expect_has(c.notices[0], "PET_MASTER_ADDR ignored: --standalone picks the store's address itself");
  expect_has(err({}, {"--standalone", "--master_port=5"}), "drop --master_addr, --master_port");
}

TEST(JobConfig, VirtualLocalRankNeedsAGpuPerProcess) {
  EXPECT_TRUE(job({"--virtual-local-rank", "--nproc_per_node=2"}).virtual_local_rank);
  EXPECT_NO_THROW(job({"--virtual-local-rank", "--nproc_per_node=2"}, {{"CUDA_VISIBLE_DEVICES", "3,5"}}));
  expect_has(error<ConfigError>({"--virtual-local-rank", "--nproc_per_node=3"}, {{"CUDA_VISIBLE_DEVICES", "3,5"}}),
             "gives each process one GPU of CUDA_VISIBLE_DEVICES='3,5', which names 2, but this node runs 3");
  expect_has(error<ConfigError>({"--virtual-local-rank", "--nproc_per_node=2"}, {{"HIP_VISIBLE_DEVICES", "0"}}),
             "HIP_VISIBLE_DEVICES='0'");
}

TEST(JobConfig, SlurmStepPlacesTheNodeWhenFlagsDoNot) {
  const Env slurm{{"SLURM_STEP_ID", "0"},
                  {"SLURM_NODEID", "2"},
                  {"SLURM_STEP_NUM_NODES", "3"},
                  {"SLURM_STEP_NUM_TASKS", "3"},
                  {"SLURM_NNODES", "8"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_STEP_NODELIST", "gpu[07-09]"},
                  {"SLURM_JOB_NODELIST", "gpu[01-08]"}};
  JobConfig c = job({"--nproc_per_node=4"}, slurm);
  EXPECT_EQ(c.nnodes, 3);
  EXPECT_EQ(c.node_rank, 2);
  EXPECT_EQ(c.master_addr, "gpu07");
  EXPECT_EQ(c.rank_of(1), 9);
  EXPECT_EQ(c.placement_source, "srun");
  // Flags win.
  c = job({"--nnodes=2", "--node_rank=1", "--master_addr=x"}, slurm);
  EXPECT_EQ(c.nnodes, 2);
  EXPECT_EQ(c.node_rank, 1);
  EXPECT_EQ(c.master_addr, "x");
  EXPECT_EQ(job({"--master_addr=y"}, slurm).master_addr, "y");
  // Older Slurm: only the job-wide names.
  c = job({}, {{"SLURM_STEPID", "1"},
               {"SLURM_NODEID", "1"},
               {"SLURM_NNODES", "2"},
               {"SLURM_NTASKS", "2"},
               {"SLURM_JOB_NODELIST", "a[5-6]"}});
  EXPECT_EQ(c.nnodes, 2);
  EXPECT_EQ(c.node_rank, 1);
  EXPECT_EQ(c.master_addr, "a5");
}

TEST(JobConfig, SlurmWithSeveralTasksPerNodeSaysHowToLaunch) {
  std::string m = error<ConfigError>({}, {{"SLURM_STEP_ID", "0"},
                                          {"SLURM_NODEID", "0"},
                                          {"SLURM_STEP_NUM_NODES", "2"},
                                          {"SLURM_STEP_NUM_TASKS", "8"},
                                          {"SLURM_STEP_NODELIST", "n[1-2]"}});
  expect_has(m, "runs 8 tasks on 2 node(s)");
  expect_has(m, "--ntasks-per-node=1");
}

TEST(JobConfig, SlurmOutsideAStepAndOneNodeStepKeepLoopback) {
  // sbatch script, no srun: not placed.
  JobConfig c = job({}, {{"SLURM_JOB_ID", "5"}, {"SLURM_NNODES", "4"}, {"SLURM_JOB_NODELIST", "n[1-4]"}});
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  // A one-node step: the store stays on loopback.
  c = job({}, {{"SLURM_STEP_ID", "0"},
               {"SLURM_NODEID", "0"},
               {"SLURM_STEP_NUM_NODES", "1"},
               {"SLURM_STEP_NUM_TASKS", "1"},
               {"SLURM_STEP_NODELIST", "n1"}});
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
}

TEST(JobConfig, OpenMpiOnePerNode) {
  const Env ompi{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}};
  JobConfig c = job({"--master_addr=head"}, ompi);
  EXPECT_EQ(c.nnodes, 2);
  EXPECT_EQ(c.node_rank, 1);
  EXPECT_EQ(c.placement_source, "mpirun");
  Env with_master = ompi;
  with_master["MASTER_ADDR"] = "head2";
  EXPECT_EQ(job({}, with_master).master_addr, "head2");
  expect_has(error<ConfigError>({}, ompi), "pass --master_addr=<host of node 0>");
  Env crowded = ompi;
  crowded["OMPI_COMM_WORLD_LOCAL_SIZE"] = "4";
  expect_has(error<ConfigError>({"--master_addr=h"}, crowded), "--map-by ppr:1:node");
}

TEST(JobConfig, MissingProgramIsCannotRun) {
  std::string m = error<CannotRun>({"/no/such/program"});
  EXPECT_EQ(m, "cannot run '/no/such/program': No such file or directory");
}

}  // namespace
}  // namespace mci::launch
