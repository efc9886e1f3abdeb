// Node 0's view of a job, fed with node samples as the nodes' launchers
// make them: the verdict (stalled, slow, in step), arrival order, events,
// the metrics' text, and its bounds.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <fstream>
#include <mutex>
#include <regex>
#include <set>

#include "common/socket.hpp"
#include "jobview/http_server.hpp"
#include "jobview/job_view.hpp"
#include "jobview/top.hpp"
#include "support/json_schema.hpp"
#include "test_paths.hpp"

namespace mci::jobview {
namespace {

using json = nlohmann::json;

json op(std::uint64_t seq, double dur_us) {
  return {{"seq", seq}, {"kind", "all_reduce"}, {"dtype", "f32"}, {"bytes", 4096}, {"dur_us", dur_us}, {"ok", true}};
}

// A rank in group "default" of `size`, which finished collectives
// 1..done (durations from dur(seq)) and runs `running` (seq, for_ms) or
// its own code.
json rank(int r, int size, std::uint64_t done, const std::function<double(std::uint64_t)>& dur,
          std::optional<std::pair<std::uint64_t, double>> running = std::nullopt,
          const std::string& process = "running", double pid = 100) {
  json recent = json::array();
  for (std::uint64_t s = done > 32 ? done - 31 : 1; s <= done; ++s) recent.push_back(op(s, dur(s)));
  json g = {{"name", "default"},
            {"backend", "cpu"},
            {"rank", r},
            {"size", size},
            {"timeout_ms", 20000},
            {"closed", false},
            {"idle_ms", 4200.0},
            {"recent", recent},
            {"kinds", {{"all_reduce", {{"ops", done}, {"failed", 0}, {"bytes", done * 4096}, {"busy_s", 0.5}}}}}};
  g["running"] = running ? json{{"kind", "all_reduce"},     {"seq", running->first},
                                {"dtype", "f32"},           {"bytes", 4096},
                                {"state", "started"},       {"peer", -1},
                                {"for_ms", running->second}}
                         : json(nullptr);
  return {{"rank", r},        {"local_rank", r},           {"host", r == 3 ? "hostB" : "hostA"},
          {"pid", pid},       {"process", process},        {"exit", process == "lost" ? "signal SIGKILL" : ""},
          {"replacement", 0}, {"groups", json::array({g})}};
}

json node(int n, std::vector<json> ranks) { return {{"node", n}, {"host", "h"}, {"ranks", ranks}}; }

auto even = [](std::uint64_t) { return 100.0; };

ViewOptions options(int world, int nnodes) {
  ViewOptions o;
  o.world = world;
  o.nnodes = nnodes;
  return o;
}

TEST(JobView, AHangInTheMakingNamesTheMissingRankAndWhatItDoes) {
  JobView v(options(4, 2));
  v.update(node(0, {rank(0, 4, 117, even, std::make_pair<std::uint64_t, double>(118, 4200.0)),
                    rank(1, 4, 117, even, std::make_pair<std::uint64_t, double>(118, 4100.0)),
                    rank(2, 4, 117, even, std::make_pair<std::uint64_t, double>(118, 4000.0))}));
  json r3 = rank(3, 4, 116, even,
                 std::make_pair<std::uint64_t, double>(117, 4300.0));  // still in #117: the others are in #118
  r3["groups"][0]["running"]["kind"] = "all_gather";
  v.update(node(1, {r3}));
  const json j = v.snapshot();
  EXPECT_EQ(j["verdict"]["state"], "stalled");
  EXPECT_EQ(j["verdict"]["rank"], 3);
  EXPECT_EQ(j["verdict"]["text"],
            "waiting 4.2 s of 20 s in all_reduce #118 for rank 3, which is in all_gather #117 on host hostB");
  EXPECT_TRUE(j["ranks"][3]["waited_for"].get<bool>());
  EXPECT_EQ(j["ranks"][0]["state"], "waiting");
  EXPECT_EQ(j["ranks"][3]["node"], 1);
  const std::string m = v.metrics();
  EXPECT_NE(m.find("mci_hang_state 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("mci_hang_rank 3\n"), std::string::npos) << m;
  EXPECT_NE(render_top(j).find("<- waited for"), std::string::npos);
}

// A rank inside another collective at the position everyone else is at
// is the one they wait for (a mismatch in the making), as the hang report
// would say: both classify through monitor/positions.hpp.
TEST(JobView, ARankInAnotherCollectiveAtThePositionIsTheOneWaitedFor) {
  JobView v(options(3, 1));
  json r2 = rank(2, 3, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0));
  r2["groups"][0]["running"]["kind"] = "broadcast";
  v.update(node(0, {rank(0, 3, 9, even, std::make_pair<std::uint64_t, double>(10, 3100.0)),
                    rank(1, 3, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0)), r2}));
  const json j = v.snapshot();
  EXPECT_EQ(j["verdict"]["state"], "stalled");
  EXPECT_EQ(j["verdict"]["rank"], 2);
  EXPECT_EQ(j["verdict"]["text"],
            "waiting 3.1 s of 20 s in all_reduce #10 for rank 2, which is in broadcast #10 on host hostA");
}

TEST(JobView, ARankInItsOwnCodeIsSaidSo) {
  JobView v(options(2, 1));
  v.update(node(0, {rank(0, 2, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0)), rank(1, 2, 9, even)}));
  EXPECT_EQ(v.snapshot()["verdict"]["text"],
            "waiting 3.0 s of 20 s in all_reduce #10 for rank 1, which is running its own code since 4.2 s (its last "
            "collective was #9) on host hostA");
}

TEST(JobView, ALongTransferWithEveryoneThereIsNotAHang) {
  JobView v(options(2, 1));
  v.update(node(0, {rank(0, 2, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0)),
                    rank(1, 2, 9, even, std::make_pair<std::uint64_t, double>(10, 2900.0))}));
  const json j = v.snapshot();
  EXPECT_EQ(j["verdict"]["state"], "slow");
  EXPECT_EQ(j["verdict"]["rank"], -1);
}

TEST(JobView, AStragglerIsNamedWithHowLateAndHowOften) {
  JobView v(options(3, 1));
  // Rank 2 enters last by 380 ms in 9 of the last 10: it waits least.
  auto early = [](std::uint64_t) { return 400'000.0; };
  auto late = [](std::uint64_t s) { return s == 20 ? 500'000.0 : 20'000.0; };
  v.update(
      node(0, {rank(0, 3, 20, early), rank(1, 3, 20, [](std::uint64_t) { return 410'000.0; }), rank(2, 3, 20, late)}));
  const json j = v.snapshot();
  EXPECT_EQ(j["verdict"]["state"], "slow");
  EXPECT_EQ(j["verdict"]["text"], "rank 2 arrives last by 380 ms in 9 of the last 10 collectives");
  // Arrival order of #19: 1, 0, then 2.
  const json& ops = j["groups"][0]["ops"];
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[1]["seq"], 19);
  EXPECT_EQ(ops[1]["arrival"], json::array({1, 0, 2}));
  EXPECT_GT(ops[1]["busbw_gbs"].get<double>(), 0);
  EXPECT_EQ(j["ranks"][2]["last_arrivals"], 19);            // each of 1..20 counted once, #20 was rank 0's
  EXPECT_EQ(j["ranks"][2]["recent"].back()["arrival"], 1);  // #20: it came first
  const std::string m = v.metrics();
  EXPECT_NE(m.find("mci_last_to_arrive_total{rank=\"2\",node=\"0\"} 19\n"), std::string::npos) << m;
  EXPECT_NE(m.find("mci_arrival_skew_microseconds{group=\"default\",collective=\"all_reduce\"} 100000\n"),
            std::string::npos)
      << m;
}

// What a reader takes as is: a pid is an integer (os.kill() refuses a
// float), and a gauge computed from times reads to 6 significant digits.
TEST(JobView, PidsAreIntegersAndGaugesAreRounded) {
  JobView v(options(2, 1));
  auto third = [](std::uint64_t) { return 1000.0 / 3; };
  v.update(node(0, {rank(0, 2, 30, third, std::nullopt, "running", 10233), rank(1, 2, 30, third)}));
  const json j = v.snapshot();
  EXPECT_TRUE(j["ranks"][0]["pid"].is_number_integer()) << j["ranks"][0]["pid"].dump();
  EXPECT_NE(j.dump().find("\"pid\":10233,"), std::string::npos) << j.dump();
  const std::string m = v.metrics();
  EXPECT_NE(m.find("mci_collective_exec_time_microseconds{rank=\"0\",node=\"0\",group=\"default\",collective=\"all_"
                   "reduce\",dtype=\"f32\"} 333.333\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("mci_algorithm_bandwidth_gbs{rank=\"0\",node=\"0\",group=\"default\",collective=\"all_reduce\","
                   "dtype=\"f32\"} 0.012288\n"),
            std::string::npos)
      << m;
}

TEST(JobView, InStepWhenNothingStandsOut) {
  JobView v(options(2, 1));
  v.update(node(0, {rank(0, 2, 30, even), rank(1, 2, 30, [](std::uint64_t) { return 90.0; })}));
  const json j = v.snapshot();
  EXPECT_EQ(j["verdict"]["state"], "ok");
  EXPECT_EQ(j["verdict"]["text"], "all 2 ranks in step (last collective #30)");
  EXPECT_NE(v.metrics().find("mci_hang_state 0\n"), std::string::npos);
}

// A rank's last operations say how they were timed: CUDA events (nccl), or
// the host's clock when the sample does not say.
TEST(JobView, EachRecentOperationSaysWhichClockTimedIt) {
  JobView v(options(2, 1));
  json r0 = rank(0, 2, 3, even);
  for (auto& o : r0["groups"][0]["recent"]) o["clock"] = "cuda";
  v.update(node(0, {r0, rank(1, 2, 3, even)}));
  const json j = v.snapshot();
  ASSERT_FALSE(j["ranks"][0]["recent"].empty());
  EXPECT_EQ(j["ranks"][0]["recent"].back()["clock"], "cuda");
  EXPECT_EQ(j["ranks"][1]["recent"].back()["clock"], "host");
}

TEST(JobView, LossesAndReplacementsAreEvents) {
  JobView v(options(2, 1));
  v.update(node(0, {rank(0, 2, 5, even), rank(1, 2, 5, even)}));
  v.update(node(0, {rank(0, 2, 5, even), rank(1, 2, 5, even, std::nullopt, "lost")}));
  json back = rank(1, 2, 5, even, std::nullopt, "running", 200);
  back["replacement"] = 1;
  v.update(node(0, {rank(0, 2, 5, even), back}));
  v.event("restart", "attempt 0 failed");
  const json j = v.snapshot();
  ASSERT_EQ(j["events"].size(), 3u) << j["events"].dump(1);
  EXPECT_EQ(j["events"][0]["kind"], "rank_lost");
  EXPECT_EQ(j["events"][0]["text"], "rank 1 (pid 100 on hostA) was lost: signal SIGKILL");
  EXPECT_EQ(j["events"][1]["kind"], "replacement");
  const std::string m = v.metrics();
  EXPECT_NE(m.find("mci_ranks_lost_total 1\n"), std::string::npos);
  EXPECT_NE(m.find("mci_recoveries_total 1\n"), std::string::npos);
  EXPECT_NE(m.find("mci_restarts_total 1\n"), std::string::npos);
}

// The same group formed again smaller is a shrink; a subgroup (a name of
// its own) is no event.
TEST(JobView, AShrinkIsAnEventASubgroupIsNot) {
  JobView v(options(3, 1));
  v.update(node(0, {rank(0, 3, 5, even), rank(1, 3, 5, even), rank(2, 3, 5, even)}));
  json sub = rank(0, 2, 1, even);
  sub["groups"][0]["name"] = "subgroup";
  v.update(node(0, {sub}));
  EXPECT_TRUE(v.snapshot()["events"].empty());
  v.update(node(0, {rank(0, 2, 6, even), rank(1, 2, 6, even)}));
  const json j = v.snapshot();
  ASSERT_EQ(j["events"].size(), 1u) << j["events"].dump(1);
  EXPECT_EQ(j["events"][0]["kind"], "shrink");
  EXPECT_EQ(j["events"][0]["text"], "group 'default' formed again with 2 rank(s) (it had 3)");
  EXPECT_NE(v.metrics().find("mci_recoveries_total 1\n"), std::string::npos);
}

// Events are listed in the order they happened, not the order node 0 heard
// of them: a rank lost on node 1, in node 1's next sample, comes before the
// shrink node 0's own ranks already showed (it caused that shrink).
TEST(JobView, EventsAreInTheOrderTheyHappenedNotTheOrderLearned) {
  JobView v(options(4, 2));
  v.update(node(0, {rank(0, 4, 5, even), rank(1, 4, 5, even)}));
  v.update(node(1, {rank(2, 4, 5, even), rank(3, 4, 5, even)}));
  v.update(node(0, {rank(0, 3, 6, even), rank(1, 3, 6, even)}));
  json lost = rank(3, 4, 5, even, std::nullopt, "lost");
  lost["changed_ago_ms"] = 2000.0;  // before the shrink was seen
  v.update(node(1, {rank(2, 3, 6, even), lost}));
  const json j = v.snapshot();
  ASSERT_EQ(j["events"].size(), 2u) << j["events"].dump(1);
  EXPECT_EQ(j["events"][0]["kind"], "rank_lost") << j["events"].dump(1);
  EXPECT_EQ(j["events"][1]["kind"], "shrink") << j["events"].dump(1);
  EXPECT_LE(j["events"][0]["t"].get<double>(), j["events"][1]["t"].get<double>());
}

TEST(JobView, StaysBoundedOverALongJob) {
  JobView v(options(2, 1));
  for (std::uint64_t done = 32; done < 20'000; done += 32) {
    v.update(node(0, {rank(0, 2, done, even), rank(1, 2, done, even)}));
  }
  for (int i = 0; i < 1000; ++i) v.event("restart", "again");
  const json j = v.snapshot();
  EXPECT_LE(j["series"]["all_reduce"].size(), JobView::kSeriesPoints);
  EXPECT_LE(j["events"].size(), JobView::kEvents);
  EXPECT_LE(j["groups"][0]["ops"].size(), 20u);
  EXPECT_LT(j.dump().size(), 200'000u);
}

// The page's JSON matches docs/api/job.schema.json in every state the
// verdict and the rows can take: the schema is the API's one definition.
TEST(JobView, EveryStateMatchesTheApiSchema) {
  std::vector<json> seen;
  {  // starting: no group yet, then a rank without one beside ranks in a collective
    JobView v(options(2, 1));
    seen.push_back(v.snapshot());
    json no_group = rank(1, 2, 0, even, std::nullopt, "starting", 0);
    no_group["groups"] = json::array();
    v.update(node(0, {rank(0, 2, 3, even, std::make_pair<std::uint64_t, double>(4, 9000.0)), no_group}));
    seen.push_back(v.snapshot());
  }
  {  // stalled, with a rank in another collective, and a point-to-point op
    JobView v(options(4, 2));
    json r2 = rank(2, 4, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0));
    r2["groups"][0]["running"]["kind"] = "broadcast";
    json p2p = rank(3, 4, 9, even, std::make_pair<std::uint64_t, double>(0, 10.0));
    p2p["groups"][0]["running"]["kind"] = "send";
    p2p["groups"][0]["running"]["peer"] = 1;
    v.update(node(0, {rank(0, 4, 9, even, std::make_pair<std::uint64_t, double>(10, 3100.0)),
                      rank(1, 4, 9, even, std::make_pair<std::uint64_t, double>(10, 3000.0)), r2}));
    v.update(node(1, {p2p}));
    seen.push_back(v.snapshot());
  }
  {  // slow: a straggler; then lost, replaced, restarted, shrunk, done
    JobView v(options(3, 1));
    auto late = [](std::uint64_t s) { return s == 20 ? 500'000.0 : 20'000.0; };
    v.update(node(0, {rank(0, 3, 20, [](std::uint64_t) { return 400'000.0; }),
                      rank(1, 3, 20, [](std::uint64_t) { return 410'000.0; }), rank(2, 3, 20, late)}));
    seen.push_back(v.snapshot());
    v.update(node(0, {rank(0, 3, 21, even), rank(1, 3, 21, even), rank(2, 3, 21, even, std::nullopt, "lost")}));
    json back = rank(2, 3, 21, even, std::nullopt, "running", 200);
    back["replacement"] = 1;
    v.update(node(0, {rank(0, 2, 22, even), rank(1, 2, 22, even), back}));
    v.event("restart", "attempt 0 failed");
    seen.push_back(v.snapshot());
    v.update(node(0, {rank(0, 2, 23, even, std::nullopt, "done"), rank(1, 2, 23, even, std::nullopt, "done"),
                      rank(2, 3, 21, even, std::nullopt, "failed")}));
    seen.push_back(v.snapshot());
    EXPECT_EQ(seen.back()["verdict"]["state"], "done");
  }
  const std::string errors = test::schema_errors(test::job_api_schema(), seen);
  EXPECT_EQ(errors, "");
  // The check can fail: a document the schema refuses is reported.
  json wrong = seen.front();
  wrong["ranks"] = json::array({{{"rank", 0}, {"pid", 10233.0}}});
  EXPECT_NE(test::schema_errors(test::job_api_schema(), {wrong}).find("document 1: at ranks/0"), std::string::npos);
}

TEST(JobView, LabelsAndTextsAreEscapedForPrometheus) {
  JobView v(options(1, 1));
  json r = rank(0, 1, 3, even);
  r["groups"][0]["name"] = "a\"b\\c\nd";
  v.update(node(0, {r}));
  const std::string m = v.metrics();
  EXPECT_NE(m.find("group=\"a\\\"b\\\\c\\nd\""), std::string::npos) << m;
}

// docs/grafana/mci-dashboard.json queries only metrics /metrics exports.
TEST(JobView, TheGrafanaDashboardQueriesExportedMetrics) {
  JobView v(options(2, 1));
  v.update(node(0, {rank(0, 2, 30, even), rank(1, 2, 30, even)}));
  std::set<std::string> exported;
  const std::string m = v.metrics();
  const std::regex type_line("# TYPE (mci_[a-z_]+) ");
  for (std::sregex_iterator it(m.begin(), m.end(), type_line), end; it != end; ++it) exported.insert((*it)[1]);
  std::ifstream f(std::string(MCI_DOCS_DIR) + "/grafana/mci-dashboard.json");
  const json dash = json::parse(f, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "the dashboard is not JSON";
  int queried = 0;
  const std::regex metric("mci_[a-z_]+");
  for (const auto& p : dash["panels"]) {
    for (const auto& t : p["targets"]) {
      const std::string expr = t["expr"];
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        EXPECT_TRUE(exported.count(it->str())) << it->str() << " (panel '" << p["title"] << "') is not exported";
        ++queried;
      }
    }
  }
  EXPECT_GT(queried, 10);
}

// The monitor's server (cpp-httplib): what the handler sees of what
// browsers send, and what the server refuses before the handler with a
// 4xx (the handler never sees it).
TEST(HttpServer, PassesWhatBrowsersSendAndRefusesTheRest) {
  std::mutex mu;
  std::vector<HttpRequest> seen;
  HttpServer server("127.0.0.1", 0, [&](const HttpRequest& r) {
    std::lock_guard lk(mu);
    seen.push_back(r);
    return HttpResponse{404, "text/plain", "x"};
  });
  // One request on a connection of its own; the whole reply, which ends
  // when the server closes the connection (one request a connection).
  auto exchange = [&](const std::string& raw) {
    const Deadline dl(std::chrono::steady_clock::now() + std::chrono::seconds(5), std::chrono::seconds(5));
    Fd s = connect_tcp("127.0.0.1", server.port(), dl, "monitor");
    send_all(s.get(), raw.data(), raw.size(), dl);
    std::string reply;
    char buf[4096];
    for (;;) {
      pollfd p{s.get(), POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) break;
      const ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<std::size_t>(n));
    }
    return reply;
  };
  const std::string out =
      exchange("GET /api/v1/job?token=a%20b&x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t\r\n\r\n");
  {
    std::lock_guard lk(mu);
    ASSERT_EQ(seen.size(), 1u) << out;
    const HttpRequest& r = seen[0];
    EXPECT_EQ(r.method, "GET");
    EXPECT_EQ(r.path, "/api/v1/job");
    EXPECT_EQ(r.query.at("token"), "a b");
    EXPECT_EQ(r.query.count("x"), 1u);
    EXPECT_EQ(r.headers.at("authorization"), "Bearer t");
  }
  EXPECT_EQ(out.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Content-Length: 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Cache-Control: no-store\r\n"), std::string::npos) << out;
  for (const std::string bad :
       {"garbage\r\n\r\n", "GET nothing HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n", "GET / SPDY/3\r\n\r\n"}) {
    const std::size_t before = seen.size();
    const std::string reply = exchange(bad);
    EXPECT_EQ(reply.rfind("HTTP/1.1 4", 0), 0u) << bad << " got: " << reply;
    EXPECT_EQ(seen.size(), before) << bad << " reached the handler as " << seen.back().method << " "
                                   << seen.back().path;
  }
  // A header line without a colon: httplib drops the line and serves the
  // rest (the hand-written server refused the request); nothing of it
  // becomes a header.
  EXPECT_EQ(exchange("GET / HTTP/1.1\r\nno colon here\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  std::lock_guard lk(mu);
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [name, value] : seen[1].headers) EXPECT_EQ(name.find("no colon"), std::string::npos) << name;
}

}  // namespace
}  // namespace mci::jobview
