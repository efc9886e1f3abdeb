// mcirun --monitor: the page's JSON and /metrics while a job runs, read
// over HTTP as a browser and Prometheus would. Each job's ranks step
// through all_reduce until the test writes $TEST_DIR/release, so nothing
// depends on how fast this machine is: the test polls the JSON until what
// it waits for shows (bounded), then releases the ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/http_get.hpp"
#include "launcher_run.hpp"
#include "mci/mci.hpp"
#include "support/json_schema.hpp"
#include "support/ports.hpp"
#include "support/rank.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

bool released() {
  const char* d = std::getenv("TEST_DIR");
  return d != nullptr && std::filesystem::exists(std::string(d) + "/release");
}

int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// Steps of one all_reduce each until released: rank 0 reads the release
// and says so in the step's own sum (its first element), so every rank
// stops after the same step. $STALL: that rank stops before step
// $STALL_AT (20) until released (everyone else waits in all_reduce #20).
// $SLOW: that rank sleeps $SLOW_MS before each step (a straggler).
// $LOSE: that rank exits with code 3 after step 10 (under continue, the
// others then stop stepping and wait for the release).
MCI_SCENARIO(monitor_steps) {
  auto pg = join();
  const int stall = env_or("STALL", -1), slow = env_or("SLOW", -1), lose = env_or("LOSE", -1);
  const int slow_ms = env_or("SLOW_MS", 30), stall_at = env_or("STALL_AT", 20);
  std::vector<float> grad(1024, 1.0f);
  for (int step = 1; step < 1000000; ++step) {
    if (pg->rank() == stall && step == stall_at) {
      while (!released()) std::this_thread::sleep_for(10ms);
    }
    if (pg->rank() == slow) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    if (lose >= 0 && step > 10) {
      if (pg->rank() == lose) std::_Exit(3);
      while (!released()) std::this_thread::sleep_for(10ms);
      return exit_code::ok;
    }
    grad[0] = pg->rank() == 0 && released() ? 1.0f : 0.0f;
    pg->all_reduce(view(grad), ReduceOp::sum);
    if (grad[0] > 0) break;
  }
  return exit_code::ok;
}

class MonitoredJob {
 public:
  MonitoredJob(int nproc, std::map<std::string, std::string> env, std::vector<std::string> extra = {})
      : port_(free_port()) {
    std::vector<std::string> args{"--standalone", fmt::format("--nproc_per_node={}", nproc),
                                  fmt::format("--monitor=127.0.0.1:{}", port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    for (auto& w : scenario_command("monitor_steps")) args.push_back(w);
    run_ = std::make_unique<Mcirun>(args, std::move(env));
  }
  // Every answer the test read matches the API's schema.
  ~MonitoredJob() {
    release();
    EXPECT_EQ(schema_errors(job_api_schema(), answers_), "") << "docs/api/job.schema.json";
  }
  void release() { std::ofstream(run_->dir() + "/release") << "go\n"; }
  Mcirun& run() { return *run_; }
  int port() const { return port_; }
  std::optional<json> job() {
    try {
      const auto r = http_get("127.0.0.1", port_, "/api/v1/job", "");
      if (r.status != 200) return std::nullopt;
      auto j = json::parse(r.body, nullptr, false);
      if (j.is_discarded()) return std::nullopt;
      answers_.push_back(j);
      return j;
    } catch (const std::exception&) {
      return std::nullopt;  // not listening yet
    }
  }
  // Polls the JSON (every 100 ms) until pred holds; the last one read.
  json until(const std::function<bool(const json&)>& pred, std::chrono::milliseconds limit = 30s) {
    json last;
    eventually(
        [&] {
          auto j = job();
          if (j) last = *j;
          std::this_thread::sleep_for(90ms);
          return j && pred(*j);
        },
        limit);
    return last;
  }
  HttpReply get(const std::string& path) { return http_get("127.0.0.1", port_, path, ""); }

 private:
  int port_;
  std::unique_ptr<Mcirun> run_;
  std::vector<json> answers_;
};

const json* rank_row(const json& j, int rank) {
  for (const auto& r : j["ranks"]) {
    if (r["rank"] == rank) return &r;
  }
  return nullptr;
}

TEST(Monitor, NamesTheRankEveryoneWaitsFor) {
  MonitoredJob m(3, {{"STALL", "1"}});
  const json j = m.until([](const json& j) { return j["verdict"]["state"] == "stalled"; });
  ASSERT_EQ(j["verdict"]["state"], "stalled") << j.dump(1) << m.run().all();
  EXPECT_EQ(j["verdict"]["rank"], 1) << j.dump(1);
  const std::string text = j["verdict"]["text"];
  // "waiting 2.3 s of 5 min in all_reduce #20 for rank 1, which is running its own code ..."
  EXPECT_NE(text.find("in all_reduce #20 for rank 1, which is running its own code"), std::string::npos) << text;
  const json* r1 = rank_row(j, 1);
  const json* r0 = rank_row(j, 0);
  ASSERT_TRUE(r1 && r0) << j.dump(1);
  EXPECT_TRUE((*r1)["waited_for"].get<bool>()) << j.dump(1);
  EXPECT_EQ((*r0)["state"], "waiting") << j.dump(1);
  EXPECT_EQ((*r0)["op"]["kind"], "all_reduce") << j.dump(1);
  EXPECT_EQ((*r0)["op"]["seq"], 20) << j.dump(1);
  EXPECT_EQ((*r0)["op"]["bytes"], 4096) << j.dump(1);
  EXPECT_FALSE((*r0)["waited_for"].get<bool>());
  // Arrival order of the completed steps is known, with busbw.
  ASSERT_FALSE((*r0)["recent"].empty()) << j.dump(1);
  EXPECT_TRUE((*r0)["recent"].back().contains("arrival")) << j.dump(1);

  const auto metrics = m.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("mci_hang_state 2\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("mci_hang_rank 1\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find(
                "mci_collectives_total{rank=\"0\",node=\"0\",group=\"default\",collective=\"all_reduce\"} 19"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("mci_bus_bandwidth_gbs{rank=\"2\",node=\"0\",group=\"default\",collective=\"all_reduce\","
                              "dtype=\"f32\"}"),
            std::string::npos)
      << metrics.body;

  m.release();
  EXPECT_EQ(m.run().code(60s), 0) << m.run().all();
}

// One stalled job, three readers: the page's verdict, mci-top's table and
// the hang report the ranks print at their timeout all name rank 1, the
// one that never entered all_reduce #20 (the page and the report classify
// through the same code, monitor/positions.hpp; mci-top reads the page).
TEST(Monitor, ThePageMciTopAndTheHangReportNameTheSameRank) {
  MonitoredJob m(3, {{"STALL", "1"}, {"MCI_TEST_TIMEOUT_MS", "8000"}});
  const json j = m.until([](const json& j) { return j["verdict"]["state"] == "stalled"; });
  ASSERT_EQ(j["verdict"]["state"], "stalled") << j.dump(1) << m.run().all();
  EXPECT_EQ(j["verdict"]["rank"], 1) << j.dump(1);
  const std::string verdict = j["verdict"]["text"];
  EXPECT_NE(verdict.find("in all_reduce #20 for rank 1, which is running its own code"), std::string::npos) << verdict;

  std::string top;
  {
    const std::string cmd = fmt::format("{} --once http://127.0.0.1:{}/ 2>&1", built("mci-top"), m.port());
    std::FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) top.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << top;
  }
  // Its header is the page's verdict; its row of rank 1, and only that
  // row, is marked as the one waited for.
  EXPECT_NE(top.find("stalled: waiting "), std::string::npos) << top;
  EXPECT_NE(top.find("for rank 1, which is running its own code"), std::string::npos) << top;
  std::smatch row;
  ASSERT_TRUE(std::regex_search(top, row, std::regex("\\n +([0-9]+) [^\\n]*<- waited for"))) << top;
  EXPECT_EQ(row[1], "1") << top;
  EXPECT_EQ(top.find("<- waited for"), top.rfind("<- waited for")) << top;

  // Ranks 0 and 2 time out in all_reduce #20 and report: rank 1, alive in
  // its own code, never entered it; nobody else is named.
  EXPECT_NE(m.run().code(60s), 0) << m.run().all();
  const std::string all = m.run().all();
  std::smatch never;
  ASSERT_TRUE(std::regex_search(all, never,
                                std::regex("Ranks that never entered all_reduce #20[^\\n]*?: ([0-9, ]+)\\. A hang")))
      << all;
  EXPECT_EQ(never[1], "1") << all;
  EXPECT_NE(all.find("rank 1: never entered all_reduce #20"), std::string::npos) << all;
  EXPECT_NE(all.find("alive, outside mci (in user code)"), std::string::npos) << all;
}

TEST(Monitor, TellsASlowStepFromAHang) {
  MonitoredJob m(2, {{"SLOW", "1"}, {"SLOW_MS", "40"}});
  const json j = m.until([](const json& j) { return j["verdict"]["state"] == "slow"; });
  ASSERT_EQ(j["verdict"]["state"], "slow") << j.dump(1) << m.run().all();
  EXPECT_EQ(j["verdict"]["rank"], 1);
  const std::string text = j["verdict"]["text"];
  EXPECT_EQ(text.rfind("rank 1 arrives last by ", 0), 0u) << text;
  EXPECT_NE(text.find(" of the last "), std::string::npos) << text;
  ASSERT_TRUE(j["series"].contains("all_reduce")) << j.dump(1);
  EXPECT_FALSE(j["series"]["all_reduce"].empty());
  // The straggler is counted as the last to arrive, the other rank not.
  const json* r1 = rank_row(j, 1);
  const json* r0 = rank_row(j, 0);
  ASSERT_TRUE(r1 && r0);
  EXPECT_GT((*r1)["last_arrivals"].get<int>(), 5 * (*r0)["last_arrivals"].get<int>()) << j.dump(1);
  m.release();
  EXPECT_EQ(m.run().code(60s), 0) << m.run().all();
}

TEST(Monitor, ShowsALostRankAndItsEvent) {
  MonitoredJob m(3, {{"LOSE", "2"}}, {"--on-rank-loss=continue"});
  const json j = m.until([](const json& j) {
    const json* r = rank_row(j, 2);
    return r && (*r)["state"] == "lost" && !j["events"].empty();
  });
  const json* r2 = rank_row(j, 2);
  ASSERT_TRUE(r2 && (*r2)["state"] == "lost") << j.dump(1) << m.run().all();
  EXPECT_EQ((*r2)["exit"], "exit code 3");
  EXPECT_EQ(j["events"][0]["kind"], "rank_lost") << j.dump(1);
  EXPECT_NE(j["events"][0]["text"].get<std::string>().find("rank 2 (pid "), std::string::npos);
  const auto metrics = m.get("/metrics");
  EXPECT_NE(metrics.body.find("mci_ranks_lost_total 1\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("mci_rank_up{rank=\"2\",node=\"0\"} 0\n"), std::string::npos) << metrics.body;
  m.release();
  EXPECT_EQ(m.run().code(60s), 0) << m.run().all();
}

TEST(Monitor, RefusesBadRequestsAndStaysUp) {
  MonitoredJob m(2, {});
  ASSERT_FALSE(m.until([](const json& j) { return !j["ranks"].empty(); }).is_null());
  EXPECT_EQ(m.get("/nothing-here").status, 404);
  EXPECT_EQ(m.get("/api/v1/job?x=%zz&&=").status, 200);
  // Raw garbage, a head that never ends, a method that writes.
  for (const std::string& raw :
       {std::string("garbage\r\n\r\n"), std::string("GET / HTTP/1.1\r\n") + std::string(20000, 'a'),
        std::string("DELETE /api/v1/job HTTP/1.1\r\n\r\n")}) {
    Fd s = connect_tcp("127.0.0.1", m.port(), Deadline(2000ms), "monitor");
    send_all(s.get(), raw.data(), raw.size(), Deadline(2000ms));
    char buf[64] = {};
    recv_all(s.get(), buf, 12, Deadline(3000ms));
    EXPECT_EQ(std::string(buf, 9), "HTTP/1.1 ") << raw.substr(0, 30);
    EXPECT_EQ(buf[9], '4') << std::string(buf, 12);
  }
  const auto page = m.get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>mci job</title>"), std::string::npos);
  EXPECT_EQ(page.body.find("innerHTML"), std::string::npos) << "the page must set text, never markup";
  EXPECT_EQ(m.get("/api/v1/job").status, 200);  // still serving
  m.release();
  EXPECT_EQ(m.run().code(60s), 0) << m.run().all();
}

// Two launchers, one per "node" of a two-node job on this host: node 1's
// ranks reach node 0's page through the job's store. Rank 3 (node 1)
// stalls; node 0's page names it, on either backend.
class MonitorTwoNodes : public ::testing::TestWithParam<std::string> {};

TEST_P(MonitorTwoNodes, Node0ShowsNode1sRanks) {
  if (!backend_available(GetParam())) GTEST_SKIP() << GetParam() << " is not built";
  const int store = free_port(), page = free_port();
  auto node = [&](int n, const std::string& monitor) {
    std::vector<std::string> a{"--nnodes=2",
                               fmt::format("--node_rank={}", n),
                               "--nproc_per_node=2",
                               "--master_addr=127.0.0.1",
                               fmt::format("--master_port={}", store),
                               monitor};
    for (auto& w : scenario_command("monitor_steps")) a.push_back(w);
    return a;
  };
  const std::map<std::string, std::string> env{{"MCI_JOB_TOKEN", "two-node-token"},
                                               {"OMP_NUM_THREADS", "1"},
                                               {"STALL", "3"},
                                               {"MCI_TEST_BACKEND", GetParam()}};
  Mcirun n1(node(1, "--monitor"), env);
  Mcirun n0(node(0, fmt::format("--monitor=127.0.0.1:{}", page)), env);
  auto release = [&] {
    for (auto* m : {&n0, &n1}) std::ofstream(m->dir() + "/release") << "go\n";
  };
  json j;
  std::vector<json> answers;
  eventually(
      [&] {
        try {
          const auto r = http_get("127.0.0.1", page, "/api/v1/job");
          j = json::parse(r.body, nullptr, false);
        } catch (const std::exception&) {
          return false;
        }
        if (!j.is_discarded()) answers.push_back(j);
        std::this_thread::sleep_for(90ms);
        return !j.is_discarded() && j["verdict"]["state"] == "stalled" && j["ranks"].size() == 4 &&
               j["ranks"][2]["state"] == "waiting";
      },
      40s);
  ASSERT_EQ(j["verdict"]["state"], "stalled") << j.dump(1) << n0.all() << n1.all();
  EXPECT_EQ(j["verdict"]["rank"], 3) << j.dump(1);
  ASSERT_EQ(j["ranks"].size(), 4u) << j.dump(1);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(j["ranks"][r]["node"], r / 2) << j.dump(1);
  EXPECT_EQ(j["ranks"][0]["backend"], GetParam());
  EXPECT_TRUE(j["ranks"][3]["waited_for"].get<bool>());
  EXPECT_EQ(j["ranks"][2]["state"], "waiting") << j.dump(1);
  EXPECT_EQ(n1.err().find("watching the job"), std::string::npos) << "only node 0 serves the page: " << n1.err();
  EXPECT_EQ(schema_errors(job_api_schema(), answers), "") << "docs/api/job.schema.json";
  release();
  EXPECT_EQ(n0.code(60s), 0) << n0.all();
  EXPECT_EQ(n1.code(60s), 0) << n1.all();
}

INSTANTIATE_TEST_SUITE_P(Backends, MonitorTwoNodes, ::testing::Values("cpu", "gloo"));

// The page's button: every rank writes its flight recorder in torch's
// format, where MCI_FR_DUMP_DIR says.
TEST(Monitor, TheDumpButtonWritesEveryRanksFlightRecorder) {
  char tmpl[] = "/tmp/mci-monitor-dumps-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  MonitoredJob m(2, {{"MCI_FR_DUMP_DIR", dir}});
  const json j = m.until([](const json& j) {
    return j["ranks"].size() == 2 && j["ranks"][0]["dumps"] == true && j["ranks"][1]["dumps"] == true;
  });
  ASSERT_TRUE(j["ranks"][1]["dumps"].get<bool>()) << j.dump(1) << m.run().all();
  // Without the header, or by GET: refused, nothing asked.
  EXPECT_EQ(m.get("/api/v1/dump").status, 405);
  Fd s = connect_tcp("127.0.0.1", m.port(), Deadline(2000ms), "monitor");
  const std::string post = "POST /api/v1/dump HTTP/1.1\r\nX-MCI-Action: dump\r\n\r\n";
  send_all(s.get(), post.data(), post.size(), Deadline(2000ms));
  std::string reply(4096, '\0');
  recv_all(s.get(), reply.data(), 12, Deadline(3000ms));
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 200") << reply;
  for (int r = 0; r < 2; ++r) {
    const std::string f = fmt::format("{}/mci_trace_rank_{}", dir, r);
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(f); }, 20s)) << f << "\n" << m.run().all();
  }
  // A pickle (protocol 2) of torch's dump dict.
  EXPECT_EQ(slurp(dir + "/mci_trace_rank_0").substr(0, 2), "\x80\x02");
  const json after = m.until([](const json& j) { return !j["events"].empty(); });
  EXPECT_EQ(after["events"].back()["kind"], "dump");
  m.release();
  EXPECT_EQ(m.run().code(60s), 0) << m.run().all();
  std::filesystem::remove_all(dir);
}

TEST(Monitor, APublicAddressNeedsTheToken) {
  // A public bind without MCI_JOB_TOKEN and without MCI_MONITOR_OPEN: refused before anything starts.
  Mcirun m({"--standalone", "--nproc_per_node=1", "--monitor=0.0.0.0:0", "/bin/true"});
  EXPECT_EQ(m.code(30s), 1) << m.all();
  EXPECT_NE(m.err().find("export MCI_JOB_TOKEN"), std::string::npos) << m.err();
}

}  // namespace
}  // namespace mci::test
