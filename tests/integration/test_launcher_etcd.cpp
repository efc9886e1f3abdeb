// mcirun with the job's store on etcd (--rdzv_backend=etcd): two "nodes" on
// this host, each its mcirun and its relay, against a real etcd. No node
// holds the store: node 0 lost whole (its mcirun killed, its ranks ended by
// its guardian) leaves node 1 training in place, to the model of the
// uninterrupted run. The same across namespace hosts with a 3-member etcd
// is the fault matrix's cpu-etcd path (tests/faults/matrix.py).
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <iterator>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/http_get.hpp"
#include "common/socket.hpp"
#include "launcher_run.hpp"
#include "support/etcd_process.hpp"
#include "support/temp_dir.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

const std::map<std::string, std::string> kEnv{{"MCI_JOB_TOKEN", "etcd-job-token"}, {"OMP_NUM_THREADS", "1"}};

Strings train(int steps, int step_ms) {
  return {built("elastic_train"), "--steps", std::to_string(steps), "--step-ms", std::to_string(step_ms)};
}

class EtcdJob : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef MCI_HAVE_ETCD
    MCI_NEEDS_SHARED_ETCD();
#else
    GTEST_SKIP() << "this build has no store on etcd (cpp-httplib was not found)";
#endif
  }
  static std::string job_id(const std::string& what) {
    return fmt::format("{}-{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), what, ::getpid());
  }
  static Strings node(int rank, const std::string& job, const Strings& flags, const Strings& program) {
    Strings a{"--nnodes=2",          fmt::format("--node_rank={}", rank), "--nproc_per_node=2",
              "--rdzv_backend=etcd", "--rdzv_endpoint=" + endpoint(),     "--rdzv_id=" + job};
    a.insert(a.end(), flags.begin(), flags.end());
    a.insert(a.end(), program.begin(), program.end());
    return a;
  }
  // The model a two-node run of `steps` ends with when nothing is lost.
  static double reference_sum(int steps) {
    const std::string job = job_id("reference");
    Mcirun n1(node(1, job, {}, train(steps, 1)), kEnv);
    Mcirun n0(node(0, job, {}, train(steps, 1)), kEnv);
    EXPECT_EQ(n0.code(60s), 0) << n0.all();
    EXPECT_EQ(n1.code(60s), 0) << n1.all();
    const auto f = finals(n0.out());
    if (f.empty()) ADD_FAILURE() << "no final line\n" << n0.all();
    return f.empty() ? 0.0 : f.front().second;
  }
  static std::string endpoint() {
#ifdef MCI_HAVE_ETCD
    return shared_etcd()->endpoint();
#else
    return "";
#endif
  }
};

std::string shared_etcd_endpoint() {
#ifdef MCI_HAVE_ETCD
  return shared_etcd()->endpoint();
#else
  return "";
#endif
}

#ifdef MCI_HAVE_ETCD
// The job's keys left on etcd (the relays' own included).
std::size_t keys_left(const std::string& job) {
  EtcdStoreOptions o;
  o.endpoints = {shared_etcd()->endpoint()};
  o.job_id = job;
  return EtcdStore(o).list({""})[0].size();
}
#endif

TEST_F(EtcdJob, TwoNodesTrainAndNode0EndsTheJobsKeys) {
#ifdef MCI_HAVE_ETCD
  const std::string job = job_id("whole");
  Mcirun n1(node(1, job, {}, train(6, 10)), kEnv);
  Mcirun n0(node(0, job, {}, train(6, 10)), kEnv);
  ASSERT_EQ(n0.code(60s), 0) << n0.all();
  ASSERT_EQ(n1.code(60s), 0) << n1.all();
  const auto f = finals(n0.out() + n1.out());
  ASSERT_EQ(f.size(), 4u) << n0.all() << n1.all();
  for (const auto& [world, sum] : f) {
    EXPECT_EQ(world, 4);
    EXPECT_EQ(sum, f.front().second) << "every rank ends with the same model";
  }
  EXPECT_TRUE(contains(n0.err(), "the job's store on etcd")) << n0.all();
  EXPECT_EQ(keys_left(job), 0u) << "node 0 ends the job's keys once every node has finished";
#endif
}

TEST_F(EtcdJob, Node0LostWholeLeavesNode1TrainingInPlace) {
#ifdef MCI_HAVE_ETCD
  constexpr int kSteps = 40;
  double uninterrupted = 0;
  ASSERT_NO_FATAL_FAILURE(uninterrupted = reference_sum(kSteps));
  const std::string job = job_id("lost");
  const Strings flags{"--on-rank-loss=continue"};
  Mcirun n1(node(1, job, flags, train(kSteps, 50)), kEnv);
  Mcirun n0(node(0, job, flags, train(kSteps, 50)), kEnv);
  // Node 0 is lost once the job trains: its mcirun (the relay with it)
  // killed; its guardian ends its ranks.
  ASSERT_TRUE(eventually([&] { return contains(n0.out(), "step 3 "); }, 60s)) << n0.all() << n1.all();
  ::kill(n0.pid(), SIGKILL);
  EXPECT_EQ(n0.code(10s), 1000 + SIGKILL);
  EXPECT_FALSE(contains(n0.err(), "holds the job's store")) << "on etcd no node holds it\n" << n0.all();
  ASSERT_EQ(n1.code(60s), 0) << n1.all();
  const auto f = finals(n1.out());
  ASSERT_EQ(f.size(), 2u) << n1.all();
  for (const auto& [world, sum] : f) {
    EXPECT_EQ(world, 2) << n1.all();
    EXPECT_NEAR(sum, uninterrupted, 1e-9 * std::abs(uninterrupted)) << "no step lost, none done twice\n" << n1.all();
  }
  EXPECT_TRUE(contains(n1.out(), "recovered world 2")) << n1.all();
#endif
}

// --on-rank-loss=replace on etcd: node 0 lost whole, its ranks 0 and 1 are
// started again on node 1 (the first surviving node to claim node 0), which
// grows its group back to four: no rank is lost for good, no step either.
TEST_F(EtcdJob, Node0LostUnderReplaceItsRanksStartOnNode1) {
#ifdef MCI_HAVE_ETCD
  constexpr int kSteps = 40;
  double uninterrupted = 0;
  ASSERT_NO_FATAL_FAILURE(uninterrupted = reference_sum(kSteps));
  const std::string job = job_id("lost");
  const Strings flags{"--on-rank-loss=replace"};
  Mcirun n1(node(1, job, flags, train(kSteps, 50)), kEnv);
  Mcirun n0(node(0, job, flags, train(kSteps, 50)), kEnv);
  ASSERT_TRUE(eventually([&] { return contains(n0.out(), "step 3 "); }, 60s)) << n0.all() << n1.all();
  ::kill(n0.pid(), SIGKILL);
  EXPECT_EQ(n0.code(10s), 1000 + SIGKILL);
  ASSERT_EQ(n1.code(90s), 0) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "node 0's mcirun is gone")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "rank 0 as pid ")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "rank 1 as pid ")) << n1.all();
  // Both at one step boundary, or one at each of two (a slow start, as
  // under a sanitizer, CI): the group is whole again either way.
  EXPECT_TRUE(contains(n1.out(), "grew world 4 joined ")) << n1.all();
  const auto f = finals(n1.out());
  ASSERT_EQ(f.size(), 4u) << n1.all();
  for (const auto& [world, sum] : f) {
    EXPECT_EQ(world, 4) << n1.all();
    EXPECT_NEAR(sum, uninterrupted, 1e-9 * std::abs(uninterrupted)) << "no step lost, none done twice\n" << n1.all();
  }
#endif
}

// --max-restarts with a fixed --nnodes: node 0 lost whole fails node 1's
// ranks (fault_rank stops at a peer's loss), and node 1's mcirun cannot
// restart without node 0. It says so at once, naming node 0, instead of
// waiting --rdzv_conf join_timeout (10 min) for a node that is gone.
TEST_F(EtcdJob, Node0LostUnderMaxRestartsEndsTheJobAtOnceSayingWhy) {
#ifdef MCI_HAVE_ETCD
  const TempDir dir;
  const std::string job = job_id("restarts");
  const Strings
      program{built("fault_rank"), "--dir", dir.path(), "--steps", "400",      "--step-ms", "20", "--fault", "none",
              "--moment",          "first", "--victim", "0",       "--policy", "stop"};
  const Strings flags{"--max-restarts=1"};
  Mcirun n1(node(1, job, flags, program), kEnv);
  Mcirun n0(node(0, job, flags, program), kEnv);
  const auto stepped = [&] {
    std::ifstream f(dir.path() + "/rank0.jsonl");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return contains(text, "\"step\":3,");
  };
  ASSERT_TRUE(eventually(stepped, 60s)) << n0.all() << n1.all();
  ::kill(n0.pid(), SIGKILL);
  EXPECT_EQ(n0.code(10s), 1000 + SIGKILL);
  // Far less than the join timeout; the bound is only the test's patience.
  EXPECT_EQ(n1.code(60s), 1) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "restart 1: node 0's mcirun is gone")) << n1.all();
  EXPECT_TRUE(contains(n1.err(), "restarting every process, restart 1 of 1")) << n1.all();
#endif
}

// --monitor on etcd: node 0 serves the page; once node 0 is lost whole,
// node 1 (the first to claim it) serves it at its own --monitor address,
// says where, and its JSON shows the job going on.
TEST_F(EtcdJob, Node0LostNode1ServesTheMonitorsPage) {
#ifdef MCI_HAVE_ETCD
  const std::string job = job_id("monitor");
  const Strings flags{"--on-rank-loss=continue", "--monitor=127.0.0.1:0"};
  Mcirun n1(node(1, job, flags, train(200, 50)), kEnv);
  Mcirun n0(node(0, job, flags, train(200, 50)), kEnv);
  ASSERT_TRUE(eventually([&] { return contains(n0.out(), "step 3 "); }, 60s)) << n0.all() << n1.all();
  EXPECT_TRUE(contains(n0.err(), "watching the job at http://127.0.0.1:")) << n0.all();
  EXPECT_FALSE(contains(n1.err(), "serves the job's page")) << "node 0 serves it while it lives\n" << n1.all();
  ::kill(n0.pid(), SIGKILL);
  const std::string says = "now serves the job's page at http://127.0.0.1:";
  ASSERT_TRUE(eventually([&] { return contains(n1.err(), says); }, 30s)) << n1.all();
  const std::string err = n1.err();
  const int port = std::atoi(err.c_str() + err.find(says) + says.size());
  ASSERT_GT(port, 0) << err;
  EXPECT_TRUE(contains(err, "node 0 was lost: this node (node 1)")) << err;
  nlohmann::json j;
  ASSERT_TRUE(eventually(
      [&] {
        try {
          j = nlohmann::json::parse(http_get("127.0.0.1", port, "/api/v1/job").body, nullptr, false);
        } catch (const std::exception&) {
          return false;
        }
        return j.is_object() && j.contains("ranks") && j["ranks"].size() == 4 && j["ranks"][2]["state"] != "";
      },
      20s))
      << j.dump(1) << n1.all();
  // Node 1's ranks as it reads them now; node 0's from the last sample it
  // published before it was lost.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(j["ranks"][r]["node"], r / 2) << j.dump(1);
  EXPECT_GT(j["ranks"][2]["pid"].get<std::int64_t>(), 0) << j.dump(1);
  EXPECT_NE(j["ranks"][2]["state"], "lost") << j.dump(1);
  EXPECT_NE(j["ranks"][2]["state"], "done") << j.dump(1);
  ::kill(n1.pid(), SIGTERM);  // the test has seen what it needs: no need to train 200 steps
  EXPECT_NE(n1.code(60s), 0) << n1.all();
#endif
}

// --nnodes MIN:MAX on etcd: no node hosts the store, so the same command
// line on every node, and any node may be lost, the one that runs rank 0
// included. Nodes beat every second and are lost after two silent ones.
Strings elastic_node(const std::string& job, const std::string& nnodes, const std::string& conf,
                     const std::string& script) {
  return {"--nnodes=" + nnodes,
          "--nproc_per_node=2",
          "--rdzv_backend=etcd-v2",
          "--rdzv_endpoint=" + shared_etcd_endpoint(),
          "--rdzv_id=" + job,
          "--max-restarts=1",
          "--rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=2," + conf,
          "/bin/sh",
          "-c",
          "echo attempt=$TORCHELASTIC_RESTART_COUNT rank=$RANK world=$WORLD_SIZE "
          "group=$GROUP_RANK/$GROUP_WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT;"
          "echo $$ > $TEST_DIR/.pid.$$ && mv $TEST_DIR/.pid.$$ $TEST_DIR/pid.$TORCHELASTIC_RESTART_COUNT.$RANK;" +
              script};
}

// Attempt 0 runs until it is stopped; later attempts finish at once.
const std::string kSleepOnAttempt0 = "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 60; fi";

// The node that runs rank 0 lost whole (its mcirun and relay SIGKILLed, its
// ranks ended by its guardian): the two other nodes restart the job
// between them (--max-restarts, as torchrun's etcd-v2 would), rank 0 on
// another node, which the job says.
TEST_F(EtcdJob, ElasticRankZerosNodeLostTheOthersRestartWithoutIt) {
#ifdef MCI_HAVE_ETCD
  const std::string job = job_id("elastic");
  const std::string conf = "join_timeout=30,last_call_timeout=30";
  std::vector<std::unique_ptr<Mcirun>> nodes;
  for (int n = 0; n < 3; ++n)
    nodes.push_back(std::make_unique<Mcirun>(elastic_node(job, "2:3", conf, kSleepOnAttempt0), kEnv));
  const auto all_started = [&] {
    int files = 0;
    for (const auto& n : nodes) {
      for (int r = 0; r < 6; ++r) files += n->has_file(fmt::format("pid.0.{}", r)) ? 1 : 0;
    }
    return files == 6;
  };
  ASSERT_TRUE(eventually(all_started, 60s)) << nodes[0]->all() << nodes[1]->all() << nodes[2]->all();
  std::size_t victim = 0;
  while (!nodes[victim]->has_file("pid.0.0")) ++victim;
  ASSERT_TRUE(nodes[victim]->has_file("pid.0.1")) << nodes[victim]->all();
  std::vector<pid_t> lost_ranks{std::stoi(nodes[victim]->file("pid.0.0")), std::stoi(nodes[victim]->file("pid.0.1"))};
  ::kill(nodes[victim]->pid(), SIGKILL);
  EXPECT_EQ(nodes[victim]->code(10s), 1000 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !process_alive(lost_ranks[0]) && !process_alive(lost_ranks[1]); }))
      << "the lost node's ranks outlived its mcirun";

  std::string out, err;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (n == victim) continue;
    EXPECT_EQ(nodes[n]->code(60s), 0) << nodes[n]->all();
    out += nodes[n]->out();
    err += nodes[n]->err();
  }
  // Attempt 1: the two nodes left, ranks numbered again from 0, rank 0's
  // MASTER_ADDR:MASTER_PORT the same on both.
  std::string master;
  for (int r = 0; r < 4; ++r) {
    const std::string line = fmt::format("attempt=1 rank={} world=4 group={}/2 master=", r, r / 2);
    ASSERT_TRUE(contains(out, line)) << out << err;
    const auto at = out.find(line) + line.size();
    const std::string m = out.substr(at, out.find('\n', at) - at);
    if (master.empty()) master = m;
    EXPECT_EQ(m, master) << out;
  }
  EXPECT_FALSE(contains(out, "attempt=1 rank=4")) << out;
  EXPECT_TRUE(contains(err, "is lost: ")) << err;
  EXPECT_TRUE(contains(err, "attempt 1: 2 node(s) (--nnodes=2:3)")) << err;
  EXPECT_TRUE(contains(err, "attempt 1: rank 0 now runs on ")) << err;
  EXPECT_TRUE(contains(err, fmt::format("it ran on {} (mcirun pid {})", host_name(), nodes[victim]->pid()))) << err;
  EXPECT_FALSE(contains(err, "holds the job's store")) << "on etcd no node holds it\n" << err;
#endif
}

// A node started once the job runs joins at its next start (a failure
// there); it never decides that start itself: only the nodes that ran the
// attempt before know when it ended.
TEST_F(EtcdJob, ElasticNodeStartedLaterJoinsAtTheNextAttempt) {
#ifdef MCI_HAVE_ETCD
  const std::string job = job_id("late");
  const std::string conf = "join_timeout=30,last_call_timeout=0";
  const std::string script =
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then"
      "  if [ $RANK = 0 ]; then while [ ! -e $TEST_DIR/fail ]; do sleep 0.02; done; exit 3; fi;"
      "  exec sleep 60;"
      "fi";
  Mcirun first(elastic_node(job, "1:2", conf, script), kEnv);
  ASSERT_TRUE(eventually([&] { return first.has_file("pid.0.0") && first.has_file("pid.0.1"); }, 30s)) << first.all();
  Mcirun late(elastic_node(job, "1:2", conf, script), kEnv);
  ASSERT_TRUE(eventually([&] { return contains(late.err(), "waiting to join it at attempt 1"); }, 30s))
      << first.all() << late.all();
  EXPECT_FALSE(late.has_file("pid.0.2")) << late.all();
  { std::ofstream(first.dir() + "/fail") << "now\n"; }
  ASSERT_EQ(first.code(60s), 0) << first.all() << late.all();
  ASSERT_EQ(late.code(60s), 0) << first.all() << late.all();
  EXPECT_TRUE(contains(first.out(), "attempt=0 rank=1 world=2 group=0/1")) << first.all();
  const std::string out = first.out() + late.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(out, fmt::format("attempt=1 rank={} world=4 group={}/2", r, r / 2))) << out;
  }
  EXPECT_TRUE(contains(late.out(), "attempt=1 rank=2 world=4 group=1/2"))
      << "the node that came first keeps GROUP_RANK 0\n"
      << out;
  EXPECT_FALSE(contains(late.out(), "attempt=0")) << late.all();
#endif
}

// A node waiting to join while every node of the running attempt is lost
// (here the only one, SIGKILLed with its ranks) does not wait for a
// decision nobody will make: it starts the next attempt itself, within the
// range's MIN.
TEST_F(EtcdJob, ElasticWaitingNodeGoesOnWhenEveryRunningNodeIsLost) {
#ifdef MCI_HAVE_ETCD
  const std::string job = job_id("orphan");
  const std::string conf = "join_timeout=30,last_call_timeout=0";
  Mcirun first(elastic_node(job, "1:2", conf, kSleepOnAttempt0), kEnv);
  ASSERT_TRUE(eventually([&] { return first.has_file("pid.0.0") && first.has_file("pid.0.1"); }, 30s)) << first.all();
  const std::vector<pid_t> ranks{std::stoi(first.file("pid.0.0")), std::stoi(first.file("pid.0.1"))};
  Mcirun late(elastic_node(job, "1:2", conf, kSleepOnAttempt0), kEnv);
  ASSERT_TRUE(eventually([&] { return contains(late.err(), "waiting to join it at attempt 1"); }, 30s))
      << first.all() << late.all();
  ::kill(first.pid(), SIGKILL);
  EXPECT_EQ(first.code(10s), 1000 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !process_alive(ranks[0]) && !process_alive(ranks[1]); }));
  ASSERT_EQ(late.code(60s), 0) << late.all();
  EXPECT_TRUE(contains(late.err(), "every node of attempt 0 is gone")) << late.all();
  EXPECT_TRUE(contains(late.out(), "attempt=1 rank=0 world=2 group=0/1")) << late.all();
  EXPECT_TRUE(contains(late.out(), "attempt=1 rank=1 world=2 group=0/1")) << late.all();
#endif
}

// The same job over TLS: etcd requires client certificates (a CA the test
// makes), and mcirun takes torchrun's --rdzv_conf keys for them.
TEST_F(EtcdJob, TwoNodesTrainOverTls) {
#ifdef MCI_HAVE_ETCD
  const TempDir dir;
  const TestCerts certs = make_test_certs(dir.path());
  if (!certs.error.empty()) GTEST_SKIP() << certs.error << " (the openssl command is needed)";
  EtcdProcess own(find_etcd(), &certs);
  EtcdStoreOptions o;
  o.endpoints = {"https://" + own.endpoint()};
  o.job_id = "probe";
  o.cacert = certs.ca;
  o.cert = certs.client_cert;
  o.key = certs.client_key;
  o.request_timeout = 500ms;
  std::string why;
  ASSERT_TRUE(etcd_client_when_up(o, &why)) << "the TLS etcd did not come up: " << why;
  const std::string job = job_id("tls");
  const auto tls_node = [&](int rank) {
    return Strings{"--nnodes=2",
                   fmt::format("--node_rank={}", rank),
                   "--nproc_per_node=2",
                   "--rdzv_backend=etcd-v2",
                   "--rdzv_endpoint=" + own.endpoint(),
                   "--rdzv_id=" + job,
                   fmt::format("--rdzv_conf=protocol=https,cacert={},cert={},key={}", certs.ca, certs.client_cert,
                               certs.client_key),
                   built("elastic_train"),
                   "--steps",
                   "4",
                   "--step-ms",
                   "10"};
  };
  Mcirun n1(tls_node(1), kEnv);
  Mcirun n0(tls_node(0), kEnv);
  ASSERT_EQ(n0.code(60s), 0) << n0.all() << n1.all();
  ASSERT_EQ(n1.code(60s), 0) << n1.all();
  const auto f = finals(n0.out() + n1.out());
  ASSERT_EQ(f.size(), 4u) << n0.all() << n1.all();
  for (const auto& [world, sum] : f) EXPECT_EQ(sum, f.front().second) << "every rank ends with the same model";
  // Without its client certificate, a node is refused with what to give.
  const Strings no_cert{"--nnodes=2",
                        "--node_rank=1",
                        "--nproc_per_node=1",
                        "--rdzv_backend=etcd",
                        "--rdzv_endpoint=https://" + own.endpoint(),
                        "--rdzv_id=" + job + "-refused",
                        "--rdzv_conf=read_timeout=1,cacert=" + certs.ca,
                        built("elastic_train")};
  Mcirun refused(no_cert, kEnv);
  EXPECT_EQ(refused.code(30s), 1) << refused.all();
  EXPECT_TRUE(contains(refused.err(), "cannot reach the job's store on etcd")) << refused.all();
  EXPECT_TRUE(contains(refused.err(), "--rdzv_conf cert=FILE,key=FILE")) << refused.all();
#endif
}

}  // namespace
}  // namespace mci::test
