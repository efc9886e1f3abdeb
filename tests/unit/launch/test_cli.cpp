#include <gtest/gtest.h>

#include "launch/cli.hpp"

namespace mci::launch {
namespace {

using Words = std::vector<std::string>;

CliArgs parse(Words w) {
  w.insert(w.begin(), "mcirun");
  CliOutcome o = parse_cli(w);
  EXPECT_TRUE(o.args.has_value());
  return o.args.value_or(CliArgs{});
}

std::string usage_error(Words w) {
  w.insert(w.begin(), "mcirun");
  try {
    parse_cli(w);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Cli, BothSpellingsOfEveryTorchrunFlag) {
  for (const char* sep : {"_", "-"}) {
    auto flag = [&](std::string name) {
      for (auto& c : name) {
        if (c == '_') c = *sep;
      }
      return "--" + name;
    };
    CliArgs a = parse({flag("nproc_per_node") + "=4", flag("nnodes"), "2", flag("node_rank") + "=1",
                       flag("master_addr") + "=node01", flag("master_port"), "1234", flag("rdzv_backend") + "=c10d",
                       flag("rdzv_id") + "=job7", flag("max_restarts") + "=0", flag("monitor_interval") + "=5",
                       flag("no_python"), "prog"});
    EXPECT_EQ(a.nproc_per_node, "4") << sep;
    EXPECT_EQ(a.nnodes, "2");
    EXPECT_EQ(a.node_rank, "1");
    EXPECT_EQ(a.master_addr, "node01");
    EXPECT_EQ(a.master_port, "1234");
    EXPECT_EQ(a.rdzv_backend, "c10d");
    EXPECT_EQ(a.rdzv_id, "job7");
    EXPECT_EQ(a.max_restarts, "0");
    EXPECT_EQ(a.monitor_interval, "5");
    EXPECT_TRUE(a.no_python);
    EXPECT_EQ(a.command, Words{"prog"});
    CliArgs b = parse({flag("rdzv_endpoint") + "=h:1", "--standalone", "--grace=0.5", "--prefix", "p"});
    EXPECT_EQ(b.rdzv_endpoint, "h:1");
    EXPECT_TRUE(b.standalone);
    EXPECT_EQ(b.grace, "0.5");
    EXPECT_TRUE(b.prefix);
  }
}

TEST(Cli, DefaultsWhenNothingIsGiven) {
  CliArgs a = parse({"prog"});
  EXPECT_EQ(a.nproc_per_node, "1");
  EXPECT_EQ(a.grace, "3");
  EXPECT_FALSE(a.nnodes || a.node_rank || a.master_addr || a.master_port || a.rdzv_endpoint);
  EXPECT_FALSE(a.standalone || a.prefix || a.no_python);
}

TEST(Cli, EverythingAfterTheProgramBelongsToIt) {
  CliArgs a = parse({"--nproc_per_node=2", "./train", "--nproc_per_node=9", "-x", "--prefix", "--", "y"});
  EXPECT_EQ(a.nproc_per_node, "2");
  EXPECT_FALSE(a.prefix);
  EXPECT_EQ(a.command, (Words{"./train", "--nproc_per_node=9", "-x", "--prefix", "--", "y"}));
}

TEST(Cli, DoubleDashEndsMcirunsOptions) {
  CliArgs a = parse({"--prefix", "--", "-weird-name", "--prefix"});
  EXPECT_TRUE(a.prefix);
  EXPECT_EQ(a.command, (Words{"-weird-name", "--prefix"}));
}

TEST(Cli, RepeatedOptionKeepsTheLastValueLikeArgparse) {
  EXPECT_EQ(parse({"--nproc_per_node=2", "--nproc-per-node=3", "p"}).nproc_per_node, "3");
  EXPECT_EQ(parse({"--master_port=1", "--master_port=2", "p"}).master_port, "2");
}

TEST(Cli, UnknownOptionsAndMissingProgramAreUsageErrors) {
  std::string m = usage_error({"--nproc_per_nod=2", "p"});
  EXPECT_NE(m.find("unknown option '--nproc_per_nod=2'"), std::string::npos) << m;
  EXPECT_NE(m.find("mcirun --help"), std::string::npos) << m;
  m = usage_error({"--nproc_per_node=2"});
  EXPECT_NE(m.find("no program given"), std::string::npos) << m;
  m = usage_error({});
  EXPECT_NE(m.find("no program given"), std::string::npos) << m;
  m = usage_error({
      "--",
  });
  EXPECT_NE(m.find("no program given"), std::string::npos) << m;
  m = usage_error({"p", "--nproc_per_node"});  // the program's own word: no error
  EXPECT_EQ(m, "no error");
  m = usage_error({"--nproc_per_node"});
  EXPECT_NE(m.find("--nproc_per_node"), std::string::npos) << m;
}

TEST(Cli, HelpIsPrintedNotRun) {
  for (const char* h : {"--help", "-h"}) {
    CliOutcome o = parse_cli({"mcirun", h});
    EXPECT_FALSE(o.args.has_value());
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_NE(o.message.find("Usage: mcirun [OPTIONS] PROGRAM [ARGS...]"), std::string::npos) << o.message;
    for (const char* f : {"--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port",
                          "--rdzv_endpoint", "--standalone", "--grace", "--prefix"}) {
      EXPECT_NE(o.message.find(f), std::string::npos) << f;
    }
  }
  EXPECT_EQ(usage_text(), parse_cli({"mcirun", "--help"}).message);
}

TEST(Cli, HelpSaysWhatEachStopSignalBecomes) {
  const std::string h = usage_text();
  for (const char* said :
       {"Ctrl-C (SIGINT) to mcirun is passed on to every process as SIGINT", "'except KeyboardInterrupt:'",
        "gets SIGTERM, and SIGKILL after another --grace",
        "SIGHUP to mcirun is passed on as that signal, then SIGKILL after --grace", "128+N after signal N"}) {
    EXPECT_NE(h.find(said), std::string::npos) << said << "\n" << h;
  }
}

}  // namespace
}  // namespace mci::launch
