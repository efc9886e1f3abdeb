// mci-perf as users run it: real processes, one per rank, every collective
// on 2 and 3 ranks, every output element checked (-c 1). The tests assert
// correctness and the report's shape, never timings: this VM's latency
// changes by 10x within seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mci/init.hpp"
#include "support/job.hpp"
#include "support/nccl_tests_parser.hpp"
#include "support/spawn.hpp"

namespace mci::test {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The table's rows: lines that start with a size.
std::vector<std::vector<std::string>> table_rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : lines_of(out)) {
    auto w = words(l);
    if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0][0])) && w.size() >= 13) rows.push_back(w);
  }
  return rows;
}

std::string summary_of(const std::string& out) {
  for (const auto& l : lines_of(out)) {
    if (l.rfind("# mci-perf summary: ", 0) == 0) return l;
  }
  return "";
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/mci-perf-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs mci-perf on `world` ranks; returns rank 0's output after checking
// that every rank exited 0 and only rank 0 printed the table.
std::string run_perf(int world, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "mci-perf");
  // Hermetic: what the test runner exported does not choose the transport
  // or the algorithm ("\x01" removes a variable).
  env.emplace("MCI_TRANSPORT", "\x01");
  env.emplace("MCI_ALGO", "\x01");
  Job job(world, args, std::move(env));
  job.wait(std::chrono::seconds(90));
  for (int r = 0; r < world; ++r) {
    const auto st = job.status(r);
    EXPECT_TRUE(st.exited && st.code == 0) << "rank " << r << " code " << st.code << " sig " << st.sig << "\n"
                                           << job.all_output();
    if (r > 0) {
      EXPECT_TRUE(table_rows(job.output(r)).empty()) << "rank " << r << " printed:\n" << job.output(r);
    }
  }
  return job.output(0);
}

// Every row checked: #wrong is 0 out of place and in place (N/A where the
// collective has no in-place form).
void expect_all_rows_right(const std::string& out, std::size_t want_rows, bool in_place) {
  const auto rows = table_rows(out);
  EXPECT_EQ(rows.size(), want_rows) << out;
  for (const auto& r : rows) {
    EXPECT_EQ(r[8], "0") << out;
    EXPECT_EQ(r[12], in_place ? "0" : "N/A") << out;
  }
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("# Avg bus bandwidth    : "), std::string::npos) << out;
  EXPECT_NE(summary_of(out).find(" wrong=0 status=OK"), std::string::npos) << out;
}

class PerfAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(PerfAllReduce, SweepChecksEveryElementAndWritesTheSummaryAndJson) {
  const int world = GetParam();
  TempDir dir;
  const std::string json = dir.path + "/r.json", csv = dir.path + "/r.csv";
  const std::string out = run_perf(world, {"all_reduce", "-b", "8", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "-c",
                                           "1", "--json", json, "--csv", csv, "--barrier-ref"});
  // 8, 32, ..., 512K: nine sizes.
  expect_all_rows_right(out, 9, true);
  for (const auto& r : table_rows(out)) {
    ASSERT_EQ(r.size(), 14u) << out;  // + barrier_us
    EXPECT_EQ(r[2], "float");
    EXPECT_EQ(r[3], "sum");
    EXPECT_EQ(r[4], "-1");
  }
  EXPECT_EQ(table_rows(out).front()[0], "8");
  EXPECT_EQ(table_rows(out).back()[0], "524288");
  const std::string summary = summary_of(out);
  EXPECT_EQ(summary.rfind("# mci-perf summary: collective=all_reduce backend=cpu transport=auto algo=auto ranks=" +
                              std::to_string(world) + " dtype=f32 op=sum root=-1 blocking=1 sizes=9 ",
                          0),
            0u)
      << out;
  EXPECT_NE(summary.find(" avg_busbw_GBps="), std::string::npos) << summary;
  EXPECT_NE(out.find("# Using devices"), std::string::npos) << out;
  EXPECT_NE(out.find("#  Rank  " + std::to_string(world - 1) + " Group  0 Pid"), std::string::npos) << out;

  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["tool"], "mci-perf");
  EXPECT_EQ(j["collective"], "all_reduce");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["ranks"], world);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["config"]["iters"], 3);
  EXPECT_EQ(j["config"]["warmup_iters"], 1);
  EXPECT_EQ(j["config"]["check_iters"], 1);
  EXPECT_EQ(j["devices"].size(), static_cast<std::size_t>(world));
  ASSERT_EQ(j["results"].size(), 9u);
  std::size_t size = 8;
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["size"], size);
    EXPECT_EQ(r["count"], size / 4);
    EXPECT_EQ(r["out_of_place"]["wrong"], 0);
    EXPECT_EQ(r["in_place"]["wrong"], 0);
    EXPECT_GT(r["out_of_place"]["time_us"].get<double>(), 0.0);
    EXPECT_GE(r["out_of_place"]["busbw_GBps"].get<double>(), 0.0);
    EXPECT_FALSE(r["barrier_us"].is_null());
    size *= 4;
  }
  EXPECT_EQ(j["wrong"], 0);
  EXPECT_EQ(j["ok"], true);

  const auto csv_lines = lines_of(slurp(csv));
  ASSERT_EQ(csv_lines.size(), 1u + 9 * 2);
  EXPECT_EQ(csv_lines[1].rfind("all_reduce,cpu,auto,auto," + std::to_string(world) + ",8,2,f32,sum,-1,out_of_place,",
                               0),
            0u)
      << csv_lines[1];
}

INSTANTIATE_TEST_SUITE_P(Worlds, PerfAllReduce, ::testing::Values(2, 3),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

struct Case {
  const char* collective;
  int world;
  const char* transport;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.collective << " on " << c.world << " ranks over " << c.transport;
}

class PerfEveryCollective : public ::testing::TestWithParam<Case> {};

TEST_P(PerfEveryCollective, BriefSweepIsRight) {
  const auto [collective, world, transport] = GetParam();
  const std::string c = collective;
  // The last rank as root: a root other than 0 exercises more of the code.
  const std::string out = run_perf(world, {c, "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-c", "1", "-r",
                                           std::to_string(world - 1), "--transport", transport});
  // 8 B to 32 KiB by 8: five rows (a barrier ignores the size but keeps
  // the sweep's rows, each a latency sample).
  expect_all_rows_right(out, 5, c != "send_recv" && c != "barrier");
  const bool rooted = c == "broadcast" || c == "reduce" || c == "gather" || c == "scatter";
  for (const auto& r : table_rows(out)) EXPECT_EQ(r[4], rooted ? std::to_string(world - 1) : "-1") << out;
  EXPECT_NE(summary_of(out).find("collective=" + c + " "), std::string::npos) << out;
  EXPECT_NE(summary_of(out).find(std::string(" transport=") + transport + " "), std::string::npos) << out;
}

std::vector<Case> every_collective() {
  // auto is shared memory on one host; tcp is the other transport.
  std::vector<Case> v;
  for (const char* transport : {"auto", "tcp"}) {
    for (int world : {2, 3}) {
      for (const char* c : {"broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "all_to_all",
                            "barrier", "send_recv"}) {
        v.push_back({c, world, transport});
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Collectives, PerfEveryCollective, ::testing::ValuesIn(every_collective()),
                         [](const auto& info) {
                           return std::string(info.param.collective) + "_world" + std::to_string(info.param.world) +
                                  "_" + info.param.transport;
                         });

TEST(Perf, AsyncBatchesTypesAndOpsAreChecked) {
  // Non-blocking batches, 16-bit floats with products, integer averages.
  std::string out = run_perf(3, {"reduce_scatter", "-b", "96", "-e", "96K", "-f", "32", "-n", "3", "-w", "1", "-z", "0",
                                 "-d", "bf16", "-o", "prod"});
  expect_all_rows_right(out, 3, true);
  EXPECT_NE(summary_of(out).find("dtype=bf16 op=prod root=-1 blocking=0"), std::string::npos) << out;
  out = run_perf(2, {"all_reduce", "-b", "8", "-e", "8K", "-f", "32", "-n", "2", "-w", "0", "-d", "int8", "-o", "avg",
                     "-c", "2", "-a", "1"});
  expect_all_rows_right(out, 3, true);
}

TEST(Perf, TransportAndAlgoAreExportedAndReported) {
  const std::string out =
      run_perf(2, {"all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "--transport", "tcp", "--algo", "ring"});
  expect_all_rows_right(out, 1, true);
  EXPECT_NE(summary_of(out).find("transport=tcp algo=ring "), std::string::npos) << out;
}

TEST(Perf, GlooBackend) {
  if (!mci::backend_available("gloo")) GTEST_SKIP() << "this build has no gloo backend";
  const std::string out =
      run_perf(2, {"all_reduce", "--backend", "gloo", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"});
  expect_all_rows_right(out, 5, true);
  EXPECT_NE(summary_of(out).find("backend=gloo "), std::string::npos) << out;
}

TEST(Perf, ThroughMcirun) {
  const std::string mcirun = built("mcirun");
  if (::access(mcirun.c_str(), X_OK) != 0) GTEST_SKIP() << "mcirun is not built in this tree";
  Spawner sp;
  std::map<std::string, std::string> env;
  for (const char* v : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MCI_JOB_TOKEN",
                        "MCI_TRANSPORT", "MCI_ALGO"}) {
    env.emplace(v, "\x01");
  }
  sp.spawn({mcirun, "--nproc_per_node=2", "--standalone", built("mci-perf"), "all_gather", "-b", "8", "-e", "4K", "-f",
            "8", "-n", "2", "-w", "1"},
           env);
  const auto st = sp.wait(0, std::chrono::seconds(60));
  const std::string out = sp.child(0).output();
  EXPECT_TRUE(st.exited && st.code == 0) << out;
  expect_all_rows_right(out, 4, true);
  EXPECT_NE(summary_of(out).find("collective=all_gather backend=cpu transport=auto algo=auto ranks=2 "),
            std::string::npos)
      << out;
}

// Single process, no job: errors are found before any rank joins.
ExitStatus run_alone(const std::vector<std::string>& args, std::string& out) {
  Spawner sp;
  std::vector<std::string> argv{built("mci-perf")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> env;
  for (const char* v : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "MCI_JOB_TOKEN", "MCI_STORE_HOSTED", "MCI_PERF_STARTED_RANKS", "MCI_TRANSPORT", "MCI_ALGO"}) {
    env.emplace(v, "\x01");
  }
  sp.spawn(argv, env);
  const auto st = sp.wait(0, std::chrono::seconds(60));
  out = sp.child(0).output();
  return st;
}

TEST(Perf, BadCommandLinesExitTwoWithAClearMessage) {
  std::string out;
  auto st = run_alone({"allreduc"}, out);
  EXPECT_EQ(st.code, 2) << out;
  EXPECT_NE(out.find("unknown collective 'allreduc': use one of all_reduce, broadcast"), std::string::npos) << out;
  st = run_alone({"all_reduce", "-b", "6"}, out);
  EXPECT_EQ(st.code, 2) << out;
  EXPECT_NE(out.find("-b 6 is not a multiple of the 4-byte float element"), std::string::npos) << out;
  st = run_alone({}, out);
  EXPECT_EQ(st.code, 2) << out;
  EXPECT_NE(out.find("name the collective"), std::string::npos) << out;
  st = run_alone({"--help"}, out);
  EXPECT_EQ(st.code, 0) << out;
  EXPECT_NE(out.find("--minbytes"), std::string::npos) << out;
}

// As nccl-tests runs alone: no launcher, a job of one rank.
TEST(Perf, AloneItRunsAOneRankJob) {
  std::string out;
  const auto st = run_alone({"all_reduce", "-b", "8", "-e", "1K", "-f", "4"}, out);
  EXPECT_EQ(st.code, 0) << out;
  EXPECT_NE(out.find("ranks=1 "), std::string::npos) << out;
  EXPECT_NE(out.find("wrong=0 status=OK"), std::string::npos) << out;
}

// A parser written for nccl-tests' output (support/nccl_tests_parser.hpp)
// reads mci-perf's stdout and -J file as they are.
TEST(Perf, ANcclTestsParserReadsTheOutputAndTheJsonFile) {
  TempDir dir;
  const std::string json = dir.path + "/nccl.json";
  const std::string out =
      run_perf(2, {"all_reduce", "-b", "8", "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "-J", json});
  const auto text = nccl_tests::parse_text(out);
  EXPECT_EQ(text.program, "all_reduce_perf");
  EXPECT_EQ(text.nthread, 1);
  EXPECT_EQ(text.ngpus, 1);
  EXPECT_EQ(text.min_bytes, 8);
  EXPECT_EQ(text.max_bytes, 65536);
  EXPECT_EQ(text.iters, 2);
  EXPECT_EQ(text.validation, 1);
  ASSERT_EQ(text.devices.size(), 2u);
  EXPECT_EQ(text.devices[1].rank, 1);
  EXPECT_NE(text.devices[0].pid, text.devices[1].pid);
  ASSERT_EQ(text.rows.size(), 7u);
  for (const auto& r : text.rows) {
    ASSERT_TRUE(r.out_of_place && r.in_place);
    EXPECT_EQ(r.out_of_place->wrong, 0.0);
    EXPECT_GT(r.out_of_place->time, 0.0);
  }
  EXPECT_TRUE(text.out_of_bounds_ok);
  EXPECT_NE(out.find("# Writing JSON output to " + json), std::string::npos) << out;

  const auto file = nccl_tests::parse_json(slurp(json));
  EXPECT_EQ(file.devices.size(), 2u);
  ASSERT_EQ(file.rows.size(), 7u);
  EXPECT_EQ(file.rows[6].size, 32768);  // 8 to 64K by 4
  EXPECT_EQ(file.rows[6].type, "float");
  EXPECT_EQ(file.rows[6].redop, "sum");
  EXPECT_EQ(file.rows[6].in_place->wrong, 0.0);
  EXPECT_TRUE(file.out_of_bounds_ok);
  // Its environment record never holds the job's secret.
  EXPECT_EQ(slurp(json).find("MCI_JOB_TOKEN"), std::string::npos);
}

// nccl-tests' -d all and -o all: every type, and for each every op.
TEST(Perf, AllTypesAndAllOpsRunInTurnAndAreChecked) {
  const std::string out =
      run_perf(2, {"all_reduce", "-b", "8", "-e", "16", "-n", "1", "-w", "0", "-d", "all", "-o", "all"});
  expect_all_rows_right(out, 8 * 5 * 2, true);
  const auto text = nccl_tests::parse_text(out);
  EXPECT_EQ(text.rows.front().type, "int8");
  EXPECT_EQ(text.rows.front().redop, "sum");
  EXPECT_EQ(text.rows[2].redop, "prod");
  EXPECT_EQ(text.rows.back().type, "bfloat16");
  EXPECT_EQ(text.rows.back().redop, "avg");
}

TEST(Perf, CyclesAggregatedIterationsAndCpuTime) {
  TempDir dir;
  const std::string json = dir.path + "/c.json";
  const std::string out = run_perf(2, {"broadcast", "-b", "8", "-e", "64", "-f", "8", "-n", "2", "-w", "0", "-N", "2",
                                       "-m", "3", "-C", "1", "-J", json});
  expect_all_rows_right(out, 4, true);  // two sizes, twice
  const auto text = nccl_tests::parse_text(out);
  EXPECT_EQ(text.agg_iters, 3);
  EXPECT_EQ(text.time_label, "cputime");
  EXPECT_EQ(text.rows[0].size, text.rows[2].size);
  const auto file = nccl_tests::parse_json(slurp(json));
  EXPECT_EQ(file.time_label, "cputime");
  EXPECT_EQ(file.agg_iters, 3);
}

// Flags that mean nothing for mci are accepted and said once, by rank 0.
TEST(Perf, IgnoredNcclTestsFlagsAreSaidOnce) {
  const std::string out = run_perf(2, {"all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-G", "4", "-p", "1"});
  const std::string note = "mci-perf: note: -G 4: ignored, mci-perf does not capture CUDA graphs";
  const auto first = out.find(note);
  EXPECT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find(note, first + 1), std::string::npos) << out;
  EXPECT_NE(out.find("mci-perf: note: -p 1: ignored"), std::string::npos) << out;
}

// nccl-tests' all_reduce_perf -g 4 drives 4 GPUs from one process; mci-perf
// -g N -t M starts N x M processes of one rank, through mcirun's launcher.
TEST(Perf, DashGStartsItsOwnRanks) {
  std::string out;
  const auto st =
      run_alone({"all_reduce", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "-g", "2", "-t", "2"}, out);
  EXPECT_EQ(st.code, 0) << out;
  const auto text = nccl_tests::parse_text(out);
  EXPECT_EQ(text.ngpus, 2);
  EXPECT_EQ(text.nthread, 2);
  ASSERT_EQ(text.devices.size(), 4u) << out;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(text.devices[static_cast<std::size_t>(r)].rank, r);
  EXPECT_NE(text.devices[0].pid, text.devices[3].pid);
  EXPECT_EQ(text.rows.size(), 4u);
  EXPECT_TRUE(text.out_of_bounds_ok);
  EXPECT_NE(out.find("ranks=4 "), std::string::npos) << out;
  // One table: the other ranks print nothing of it.
  EXPECT_EQ(out.find("# Collective test starting", out.find("# Collective test starting") + 1), std::string::npos)
      << out;
}

// The launcher's rules hold for those ranks: one fails, the job stops and
// the launcher says which.
TEST(Perf, DashGRanksFailAsAJob) {
  std::string out;
  const auto st = run_alone({"broadcast", "-r", "5", "-b", "8", "-e", "8", "-g", "2"}, out);
  EXPECT_EQ(st.code, 1) << out;
  EXPECT_NE(out.find("-r 5 is not a rank of this job: the job has ranks 0..1"), std::string::npos) << out;
  EXPECT_NE(out.find("mcirun: job failed: rank "), std::string::npos) << out;
}

TEST(Perf, DashGInsideALauncherJobIsRefused) {
  Job job(2, {"mci-perf", "all_reduce", "-g", "2", "-b", "8", "-e", "8"});
  job.wait(std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.status(r).code, 2) << job.all_output();
  EXPECT_NE(job.output(0).find("-g 2 -t 1 asks mci-perf to start 2 ranks itself, but this process is already a rank"),
            std::string::npos)
      << job.all_output();
}

TEST(Perf, RootOutsideTheJobIsRefusedOnEveryRank) {
  Job job(2, {"mci-perf", "broadcast", "-r", "2", "-b", "8", "-e", "8"});
  job.wait(std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.status(r).code, 2) << job.all_output();
  EXPECT_NE(job.output(0).find("-r 2 is not a rank of this job: the job has ranks 0..1"), std::string::npos)
      << job.all_output();
}

}  // namespace
}  // namespace mci::test
