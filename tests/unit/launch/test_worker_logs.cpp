#include <gtest/gtest.h>

#include <filesystem>

#include "launch/config/cli.hpp"
#include "launch/output/worker_logs.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(WorkerLogs, RedirectsAndTeeAreAValueOrAMapLikeTorchrunsStd) {
  StdStreams all = parse_std_streams("-r", "3");
  EXPECT_FALSE(all.is_map);
  EXPECT_EQ(all.of(0), kStdOut | kStdErr);
  EXPECT_EQ(all.of(7), 3);
  EXPECT_EQ(parse_std_streams("-r", "0").of(0), 0);
  EXPECT_FALSE(parse_std_streams("-r", "0").any());
  StdStreams map = parse_std_streams("-t", "0:1,1:2,12:3");
  EXPECT_TRUE(map.is_map);
  EXPECT_EQ(map.of(0), kStdOut);
  EXPECT_EQ(map.of(1), kStdErr);
  EXPECT_EQ(map.of(12), 3) << "more than torchrun's one digit";
  EXPECT_EQ(map.of(2), 0) << "a local rank the map leaves out gets nothing";
  for (const char* bad : {"4", "", "x", "1,2", "0:4", "0:", ":1", "0:1,", "a:1", "-1:1", "0:1:2"}) {
    const std::string m = usage_error([&] { parse_std_streams("-r/--redirects", bad); });
    EXPECT_NE(m.find("-r/--redirects='" + std::string(bad) + "' is not valid: give 0 (none), 1 (stdout)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("e.g. 0:3,1:2"), std::string::npos) << m;
  }
}

TEST(WorkerLogs, LocalRanksFilterAndDuplicateFilters) {
  EXPECT_EQ(parse_local_ranks("--local_ranks_filter", "0,2,2"), (std::set<int>{0, 2}));
  EXPECT_TRUE(parse_local_ranks("--local_ranks_filter", "").empty());
  for (const char* bad : {"a", "0,,1", "1,", "-1"}) {
    EXPECT_NE(usage_error([&] {
                parse_local_ranks("PET_LOCAL_RANKS_FILTER", bad);
              }).find("PET_LOCAL_RANKS_FILTER='" + std::string(bad) + "' is not valid: give a comma-separated"),
              std::string::npos)
        << bad;
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(parse_filters("apple,orange"), (V{"apple", "orange"}));
  EXPECT_EQ(parse_filters("a,,b,c"), (V{"a,b", "c"})) << "',,' is a comma, as torchrun's comma_separated_list";
  EXPECT_EQ(parse_filters(""), V{});
  EXPECT_EQ(parse_filters("x,"), (V{"x", ""}));
}

TEST(WorkerLogs, PrefixTemplatesAreSafeSubstitutedLikePythonsTemplate) {
  EXPECT_EQ(render_prefix("[${role_name}${local_rank}]:", "default", 5, 1, "h"), "[default1]:");
  EXPECT_EQ(render_prefix("${hostname}:${rank}: ", "r", 12, 0, "r12i0n8"), "r12i0n8:12: ");
  EXPECT_EQ(render_prefix("$rank|$local_rank", "r", 3, 1, "h"), "3|1");
  EXPECT_EQ(render_prefix("$$${rank} ${nope} $nope ${rank $", "r", 3, 1, "h"), "$3 ${nope} $nope ${rank $");
}

TEST(WorkerLogs, EachStreamGoesWhereTorchrunSendsIt) {
  LogOptions o;
  o.redirects = parse_std_streams("-r", "0:1");
  o.tee = parse_std_streams("-t", "1:3");
  const RankLabel r0{"default", 4, 0, "h"}, r1{"default", 5, 1, "h"}, r2{"default", 6, 2, "h"};
  RankStreams s = plan_streams(o, "/logs/a", r0, false);
  EXPECT_FALSE(s.out.console) << "redirected: the file only";
  EXPECT_EQ(s.out.file, "/logs/a/0/stdout.log");
  EXPECT_TRUE(s.err.console);
  EXPECT_EQ(s.err.file, "");
  EXPECT_EQ(s.err.prefix, "");
  s = plan_streams(o, "/logs/a", r1, false);
  EXPECT_TRUE(s.out.console && s.err.console) << "tee'd: both";
  EXPECT_EQ(s.out.file, "/logs/a/1/stdout.log");
  EXPECT_EQ(s.err.file, "/logs/a/1/stderr.log");
  EXPECT_EQ(s.out.prefix, "[default1]:") << "torchrun's console lines of a tee'd stream";
  s = plan_streams(o, "/logs/a", r2, true);
  EXPECT_TRUE(s.out.console);
  EXPECT_EQ(s.out.file, "");
  EXPECT_EQ(s.out.prefix, "[rank 6] ") << "--prefix";

  o.console_ranks = {1};
  s = plan_streams(o, "/logs/a", r2, false);
  EXPECT_FALSE(s.out.console || s.err.console) << "--local-ranks-filter hides the others";
  s = plan_streams(o, "/logs/a", r1, false);
  EXPECT_TRUE(s.out.console);
  EXPECT_EQ(s.out.file, "/logs/a/1/stdout.log") << "and keeps the files";

  o.prefix_template = "${rank}> ";
  o.stdout_filters = {"loss"};
  s = plan_streams(o, "/logs/a", r1, true);
  EXPECT_EQ(s.out.prefix, "5> ") << "a template wins over --prefix, on every console line";
  EXPECT_EQ(s.err.prefix, "5> ");
  EXPECT_EQ(s.out.filtered_file, "/logs/a/filtered_stdout.log");
  EXPECT_EQ(s.out.filtered_prefix, "5> ");
  EXPECT_EQ(s.out.filters, std::vector<std::string>{"loss"});
  EXPECT_EQ(s.err.filtered_file, "") << "no stderr filters";
  s = plan_streams(o, "/logs/a", r0, false);
  EXPECT_EQ(s.out.filtered_file, "") << "only tee'd streams are duplicated";

  s = plan_streams(LogOptions{}, "", r0, false);
  EXPECT_TRUE(s.out.console && s.err.console);
  EXPECT_EQ(s.out.file + s.err.file + s.out.prefix, "");
}

TEST(WorkerLogs, FoldersFollowTorchrunsLayout) {
  test::TempDir d;
  const LogFolders f(d.path() + "/logs/deep", "job7", 3);
  namespace fs = std::filesystem;
  const fs::path run(f.run_dir());
  EXPECT_EQ(run.parent_path(), fs::path(d.path() + "/logs/deep")) << "made when missing";
  EXPECT_EQ(run.filename().string().rfind("job7_", 0), 0u) << run;
  EXPECT_EQ(run.filename().string().size(), 5u + 6u) << "RUN_ID_ and mkdtemp's six characters";
  EXPECT_EQ(f.attempt_dir(), f.run_dir() + "/attempt_0");
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(fs::is_directory(f.attempt_dir() + "/" + std::to_string(r))) << r;
  EXPECT_FALSE(fs::exists(f.attempt_dir() + "/3"));
  EXPECT_EQ(log_error_file(f.attempt_dir(), 2), f.attempt_dir() + "/2/error.json");
  const LogFolders again(d.path() + "/logs/deep", "job7", 1);
  EXPECT_NE(again.run_dir(), f.run_dir()) << "the folder is reused by later runs, each in its own sub-folder";

  const std::string file = d.file("plain");
  std::string m;
  try {
    LogFolders bad(file, "x", 1);
  } catch (const ConfigError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("--log-dir=" + file + " is a file: give a folder"), std::string::npos) << m;
}

}  // namespace
}  // namespace mci::launch
