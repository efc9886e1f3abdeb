// What rank 0 prints and writes: nccl-tests' columns and footer, the summary
// line and the JSON and CSV records.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "perf/report.hpp"
#include "support/nccl_tests_parser.hpp"

namespace mci::perf {
namespace {

RunInfo sample_info(OpKind c = OpKind::all_reduce) {
  RunInfo info;
  info.options.collective = c;
  info.options.sweep = {8, 1024, 2, 0};
  info.options.argv = {"mci-perf", "all_reduce"};
  info.ranks = 2;
  info.version = "0.1.0";
  info.devices = {{0, 101, "hostA", "cpu"}, {1, 102, "hostA", "cpu"}};
  return info;
}

Row sample_row() {
  Row r;
  r.bytes = 1024;
  r.count = 256;
  Cell c;
  c.time_us = 12.345;
  c.bw = {0.08295, 0.08295};
  c.wrong = 0;
  r.out_of_place = c;
  c.time_us = 10.0;
  c.wrong = 3;
  r.in_place = c;
  return r;
}

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(PerfReport, NumbersKeepTheirColumnWidth) {
  EXPECT_EQ(format_number(12.345, 7), "  12.35");
  EXPECT_EQ(format_number(0.0, 6), "  0.00");
  EXPECT_EQ(format_number(1234.5, 7), "1234.50");
  EXPECT_EQ(format_number(12345.6, 7), "12345.6");
  EXPECT_EQ(format_number(1234567.0, 7), "1234567");
  EXPECT_EQ(format_number(123456789.0, 7), "1.2e+08");
  EXPECT_EQ(format_number(99.999, 6), "100.00");
  for (double v : {0.001, 1.0, 99.0, 1234.0, 99999.0, 1e9}) {
    EXPECT_EQ(format_number(v, 7).size(), 7u) << v;
  }
}

TEST(PerfReport, RowHasTheNcclTestsColumns) {
  const RunInfo info = sample_info();
  const auto f = split_ws(format_row(info, sample_row()));
  ASSERT_EQ(f.size(), 13u);
  EXPECT_EQ(f[0], "1024");
  EXPECT_EQ(f[1], "256");
  EXPECT_EQ(f[2], "float");
  EXPECT_EQ(f[3], "sum");
  EXPECT_EQ(f[4], "-1");  // all_reduce has no root
  EXPECT_EQ(f[5], "12.35");
  EXPECT_EQ(f[6], "0.08");
  EXPECT_EQ(f[7], "0.08");
  EXPECT_EQ(f[8], "0");
  EXPECT_EQ(f[9], "10.00");
  EXPECT_EQ(f[12], "3");
}

TEST(PerfReport, HeaderNamesEveryColumnAndAlignsWithRows) {
  const RunInfo info = sample_info();
  const std::string h = table_header(info);
  EXPECT_NE(h.find("out-of-place"), std::string::npos);
  EXPECT_NE(h.find("in-place"), std::string::npos);
  const auto lines = [&] {
    std::vector<std::string> v;
    std::istringstream in(h);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }();
  ASSERT_EQ(lines.size(), 4u);
  const auto names = split_ws(lines[2]);
  EXPECT_EQ(names, (std::vector<std::string>{"#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                                             "#wrong", "time", "algbw", "busbw", "#wrong"}));
  // Right-aligned columns end where the row's values end (nccl-tests ends
  // its header lines with one space, for the timestamp column).
  const std::string row = format_row(info, sample_row());
  EXPECT_EQ(lines[2].back(), ' ');
  EXPECT_EQ(lines[2].size() - 1, row.size() - 1);
}

TEST(PerfReport, RootedCollectivesShowTheRootAndNoOp) {
  RunInfo info = sample_info(OpKind::broadcast);
  info.options.root = 1;
  const auto f = split_ws(format_row(info, sample_row()));
  EXPECT_EQ(f[3], "none");
  EXPECT_EQ(f[4], "1");
}

TEST(PerfReport, MissingCellsAndUncheckedRowsSayNA) {
  RunInfo info = sample_info(OpKind::send);
  Row r = sample_row();
  r.in_place.reset();
  r.out_of_place->wrong.reset();
  const auto f = split_ws(format_row(info, r));
  ASSERT_EQ(f.size(), 13u);
  EXPECT_EQ(f[8], "N/A");
  EXPECT_EQ(f[9], "N/A");
  EXPECT_EQ(f[12], "N/A");
}

TEST(PerfReport, BarrierReferenceAddsOneColumn) {
  RunInfo info = sample_info();
  info.options.barrier_ref = true;
  Row r = sample_row();
  r.barrier_us = 42.5;
  const auto f = split_ws(format_row(info, r));
  ASSERT_EQ(f.size(), 14u);
  EXPECT_EQ(f[13], "42.50");
  EXPECT_NE(table_header(info).find("barrier_us"), std::string::npos);
  // Its header ends where its values end, with or without timestamps.
  for (bool stamps : {false, true}) {
    info.options.report_timestamps = stamps;
    r.timestamp = "2026-12-01 04:00:00";
    std::istringstream h(table_header(info));
    std::string line;
    for (int i = 0; i < 3; ++i) std::getline(h, line);
    EXPECT_EQ(line.size(), format_row(info, r).size() - 1) << stamps << "\n" << line << "\n" << format_row(info, r);
  }
}

TEST(PerfReport, FooterAndSummary) {
  const RunInfo info = sample_info();
  std::vector<Row> rows{sample_row()};
  const Totals t = summarize(rows);
  EXPECT_EQ(t.wrong, 3u);
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(t.cells, 2u);
  EXPECT_NEAR(t.avg_busbw_GBps, 0.08295, 1e-12);
  const std::string f = footer(info, t);
  EXPECT_NE(f.find("# Out of bounds values : 3 FAILED"), std::string::npos) << f;
  EXPECT_NE(f.find("# Avg bus bandwidth    : 0.08295"), std::string::npos) << f;
  const std::string s = summary_line(info, t, rows.size());
  EXPECT_EQ(s.rfind("# mci-perf summary: collective=all_reduce backend=cpu transport=auto algo=auto ranks=2 "
                    "dtype=f32 op=sum root=-1 blocking=1 sizes=1 ",
                    0),
            0u)
      << s;
  EXPECT_NE(s.find(" avg_busbw_GBps=0.08"), std::string::npos) << s;
  EXPECT_NE(s.find(" wrong=3 status=FAILED\n"), std::string::npos) << s;

  rows[0].in_place->wrong = 0;
  const Totals ok = summarize(rows);
  EXPECT_NE(footer(info, ok).find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(footer(info, ok).find("#\n# Collective test concluded: all_reduce_perf\n#\n"), std::string::npos);
  EXPECT_NE(summary_line(info, ok, 1).find(" wrong=0 status=OK"), std::string::npos);
}

TEST(PerfReport, UncheckedRunsAreOk) {
  Row r = sample_row();
  r.out_of_place->wrong.reset();
  r.in_place->wrong.reset();
  const Totals t = summarize({r});
  EXPECT_FALSE(t.wrong);
  EXPECT_TRUE(t.ok());
  EXPECT_NE(summary_line(sample_info(), t, 1).find(" wrong=N/A status=OK"), std::string::npos);
}

TEST(PerfReport, JsonHoldsConfigDevicesAndEveryRow) {
  const RunInfo info = sample_info();
  std::vector<Row> rows{sample_row()};
  rows[0].in_place.reset();
  const auto j = nlohmann::json::parse(to_json(info, rows, summarize(rows)));
  // nccl-tests' keys.
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["config"]["nthreads"], 1);
  EXPECT_EQ(j["config"]["ngpus"], 1);
  EXPECT_EQ(j["config"]["minimum_bytes"], 8);
  EXPECT_EQ(j["config"]["iterations"], 20);
  EXPECT_EQ(j["config"]["blocking_collectives"], "true");
  EXPECT_EQ(j["config"]["devices"][1]["device"], -1);
  EXPECT_EQ(j["config"]["devices"][1]["hostname"], "hostA");
  EXPECT_EQ(j["results"][0]["root"], "    -1");
  EXPECT_DOUBLE_EQ(j["results"][0]["out_of_place"]["time"].get<double>(), 12.345);
  EXPECT_EQ(j["results"][0]["out_of_place"]["nwrong"], 0);
  EXPECT_EQ(j["out_of_bounds"]["okay"], "true");
  // mci's, kept beside them.
  EXPECT_EQ(j["tool"], "mci-perf");
  EXPECT_EQ(j["mci_version"], "0.1.0");
  EXPECT_EQ(j["collective"], "all_reduce");
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["type"], "float");
  EXPECT_EQ(j["config"]["step_factor"], 2);
  EXPECT_EQ(j["config"]["average"], "max");
  EXPECT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["pid"], 102);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["size"], 1024);
  EXPECT_DOUBLE_EQ(j["results"][0]["out_of_place"]["time_us"].get<double>(), 12.345);
  EXPECT_EQ(j["results"][0]["out_of_place"]["wrong"], 0);
  EXPECT_TRUE(j["results"][0]["in_place"].is_null());
  EXPECT_EQ(j["wrong"], 0);
  EXPECT_EQ(j["ok"], true);
}

TEST(PerfReport, CsvHasOneLinePerRowAndPlacement) {
  const RunInfo info = sample_info();
  const std::string csv = to_csv(info, {sample_row()});
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("collective,backend,transport,algo,ranks,size,", 0), 0u);
  EXPECT_EQ(lines[1].rfind("all_reduce,cpu,auto,auto,2,1024,256,f32,sum,-1,out_of_place,12.345,", 0), 0u) << lines[1];
  EXPECT_NE(lines[2].find(",in_place,10.000,"), std::string::npos) << lines[2];
}

TEST(PerfReport, BannerHasNcclTestsLinesAndMciOwn) {
  const std::string b = banner(sample_info());
  EXPECT_NE(b.find("# mci-perf version 0.1.0: all_reduce  backend cpu  transport auto"), std::string::npos) << b;
  EXPECT_NE(b.find("\n# Collective test starting: all_reduce_perf\n"), std::string::npos) << b;
  EXPECT_NE(b.find("\n# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg "
                   "iters: 1 validation: 1 graph: 0 unalign: 0\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("\n#  Rank  1 Group  0 Pid    102 on      hostA device -1 [cpu] host memory\n"), std::string::npos)
      << b;
}

TEST(PerfReport, CudaDevicesAreNumberedAsNcclTestsDoes) {
  RunInfo info = sample_info();
  info.devices = {{0, 7, "gpuhost", "cuda:3"}};
  EXPECT_NE(banner(info).find("#  Rank  0 Group  0 Pid      7 on    gpuhost device  3 [cuda:3] CUDA device 3\n"),
            std::string::npos)
      << banner(info);
}

// What a script written for nccl-tests reads from the whole report.
TEST(PerfReport, AParserWrittenForNcclTestsReadsTheTextAndTheJson) {
  RunInfo info = sample_info();
  std::vector<Row> rows{sample_row(), sample_row()};
  rows[1].bytes = 2048;
  rows[1].count = 512;
  rows[1].dtype = DType::i32;
  const Totals t = summarize(rows);
  std::string text = banner(info) + table_header(info);
  for (const Row& r : rows) text += format_row(info, r);
  text += footer(info, t) + summary_line(info, t, rows.size());
  const auto r = test::nccl_tests::parse_text(text);
  EXPECT_EQ(r.program, "all_reduce_perf");
  EXPECT_EQ(r.nthread, 1);
  EXPECT_EQ(r.ngpus, 1);
  EXPECT_EQ(r.max_bytes, 1024);
  EXPECT_EQ(r.step_kind, "factor");
  EXPECT_EQ(r.agg_iters, 1);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[1].pid, 102);
  EXPECT_EQ(r.devices[1].device, -1);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].size, 2048);
  EXPECT_EQ(r.rows[1].type, "int32");
  EXPECT_EQ(r.rows[0].root, -1);
  EXPECT_NEAR(r.rows[0].out_of_place->time, 12.35, 1e-9);
  EXPECT_EQ(r.rows[0].in_place->wrong, 3.0);
  EXPECT_EQ(r.out_of_bounds, 6);
  EXPECT_FALSE(r.out_of_bounds_ok);

  const auto j = test::nccl_tests::parse_json(to_json(info, rows, t));
  EXPECT_EQ(j.devices.size(), 2u);
  ASSERT_EQ(j.rows.size(), 2u);
  EXPECT_EQ(j.rows[1].type, "int32");
  EXPECT_EQ(j.rows[0].root, -1);
  EXPECT_DOUBLE_EQ(j.rows[0].out_of_place->time, 12.345);
  EXPECT_EQ(j.out_of_bounds, 6);
}

TEST(PerfReport, CpuTimeAndTimestampsAsNcclTestsLabelsThem) {
  RunInfo info = sample_info();
  info.options.report_cputime = true;
  info.options.report_timestamps = true;
  Row r = sample_row();
  r.out_of_place->cpu_time_us = 1.5;
  r.timestamp = "2026-12-01 04:00:00";
  const std::string h = table_header(info);
  EXPECT_NE(h.find("cputime"), std::string::npos) << h;
  EXPECT_NE(h.find("timestamp"), std::string::npos) << h;
  const auto f = split_ws(format_row(info, r));
  ASSERT_EQ(f.size(), 15u);
  EXPECT_EQ(f[5], "1.50");
  EXPECT_EQ(f[13], "2026-12-01");
  const auto j = nlohmann::json::parse(to_json(info, {r}, summarize({r})));
  EXPECT_DOUBLE_EQ(j["results"][0]["out_of_place"]["cpu_time"].get<double>(), 1.5);
  EXPECT_FALSE(j["results"][0]["out_of_place"].contains("time"));
}

}  // namespace
}  // namespace mci::perf
