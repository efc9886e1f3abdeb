#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "launch/config/cli.hpp"

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
  EXPECT_FALSE(a.grace) << "resolve_job applies 3 s (or --shutdown-timeout, TORCH_ELASTIC_SHUTDOWN_TIMEOUT)";
  EXPECT_FALSE(a.nnodes || a.node_rank || a.master_addr || a.master_port || a.rdzv_endpoint);
  EXPECT_FALSE(a.standalone || a.prefix || a.no_python || a.module || a.run_path || a.virtual_local_rank);
  EXPECT_TRUE(a.from_env.empty());
}

// A value each of torchrun 2.15's options takes (the flags take none).
const std::map<std::string, std::string> kValues{
    {"monitor", "8265"},
    {"nnodes", "1"},
    {"nproc_per_node", "2"},
    {"rdzv_backend", "c10d"},
    {"rdzv_endpoint", "h:1"},
    {"rdzv_id", "job"},
    {"rdzv_conf", "join_timeout=5"},
    {"max_restarts", "0"},
    {"monitor_interval", "0.1"},
    {"start_method", "spawn"},
    {"event_log_handler", "null"},
    {"role", "trainer"},
    {"log_dir", "/tmp/logs"},
    {"redirects", "3"},
    {"tee", "0:1,1:2"},
    {"log_line_prefix_template", "${rank}:"},
    {"local_ranks_filter", "0,1"},
    {"duplicate_stdout_filters", "apple,orange"},
    {"duplicate_stderr_filters", "pear"},
    {"node_rank", "0"},
    {"master_addr", "node01"},
    {"master_port", "1234"},
    {"local_addr", "10.0.0.2"},
    {"logs_specs", "mine"},
    {"numa_binding", "node"},
    {"signals_to_handle", "SIGUSR1"},
    {"shutdown_timeout", "7"},
    {"grace", "0.5"},
    {"bind", "core"},
    {"on_rank_loss", "continue"},
};
const std::set<std::string> kFlags{"standalone", "module", "no_python", "run_path", "virtual_local_rank", "prefix"};

std::string underscored(const std::string& spelling) {
  const std::map<std::string, std::string> shorts{{"-m", "module"}, {"-r", "redirects"}, {"-t", "tee"}};
  if (shorts.count(spelling)) return shorts.at(spelling);
  std::string name;
  for (char c : spelling.substr(spelling.find_first_not_of('-'))) name.push_back(c == '-' ? '_' : c);
  return name;
}

// --monitor's value is optional: bare, it must not take the program's name
// (or a following option) as its value; after the program it is the
// program's own word.
TEST(Cli, ABareMonitorLeavesTheProgramAlone) {
  CliArgs a = parse({"--monitor", "train.py", "--lr=1"});
  EXPECT_EQ(a.monitor, "auto");
  EXPECT_EQ(a.command, (Words{"train.py", "--lr=1"}));
  a = parse({"--nproc_per_node", "2", "--monitor", "--prefix", "train.py"});
  EXPECT_EQ(a.monitor, "auto");
  EXPECT_TRUE(a.prefix);
  EXPECT_EQ(a.nproc_per_node, "2");
  a = parse({"--monitor=127.0.0.1:8265", "train.py"});
  EXPECT_EQ(a.monitor, "127.0.0.1:8265");
  a = parse({"train.py", "--monitor"});
  EXPECT_FALSE(a.monitor);
  EXPECT_EQ(a.command, (Words{"train.py", "--monitor"}));
  a = parse({"--", "--monitor"});
  EXPECT_FALSE(a.monitor);
}

TEST(Cli, EverySpellingOfEveryOptionParses) {
  for (const std::string& s : option_spellings()) {
    const std::string name = underscored(s);
    if (name == "h" || name == "help" || name == "print_completion") continue;  // they print, see below
    Words w{s};
    if (!kFlags.count(name)) {
      ASSERT_TRUE(kValues.count(name)) << s << " has no value in this test: add one";
      w.push_back(kValues.at(name));
    }
    w.push_back("prog");
    w.insert(w.begin(), "mcirun");
    CliOutcome o;
    EXPECT_NO_THROW(o = parse_cli(w)) << s;
    EXPECT_TRUE(o.args.has_value()) << s;
  }
}

TEST(Cli, TorchrunsNewOptionsLandWhereResolveJobReadsThem) {
  CliArgs a = parse({"-m",
                     "-r",
                     "3",
                     "-t",
                     "0:1,1:2",
                     "--run-path",
                     "--log-dir=/l",
                     "--role",
                     "r",
                     "--local-ranks-filter=0",
                     "--duplicate_stdout_filters",
                     "a,,b",
                     "--local_addr=h",
                     "--numa-binding=exclusive",
                     "--signals-to-handle=SIGUSR1,SIGTERM",
                     "--shutdown-timeout=9",
                     "--virtual-local-rank",
                     "--start_method=fork",
                     "--rdzv-conf=timeout=3",
                     "prog"});
  EXPECT_TRUE(a.module && a.run_path && a.virtual_local_rank);
  EXPECT_EQ(a.redirects, "3");
  EXPECT_EQ(a.tee, "0:1,1:2");
  EXPECT_EQ(a.log_dir, "/l");
  EXPECT_EQ(a.role, "r");
  EXPECT_EQ(a.local_ranks_filter, "0");
  EXPECT_EQ(a.duplicate_stdout_filters, "a,,b");
  EXPECT_EQ(a.local_addr, "h");
  EXPECT_EQ(a.numa_binding, "exclusive");
  EXPECT_EQ(a.signals_to_handle, "SIGUSR1,SIGTERM");
  EXPECT_EQ(a.shutdown_timeout, "9");
  EXPECT_EQ(a.start_method, "fork");
  EXPECT_EQ(a.rdzv_conf, "timeout=3");
  EXPECT_EQ(parse({"-r3", "p"}).redirects, "3") << "a short option's value may be attached, as argparse allows";
}

TEST(Cli, EveryPetTwinIsReadWhenTheCommandLineLeavesItOut) {
  for (const std::string& var : pet_variables()) {
    std::string name = var.substr(4);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string value = kFlags.count(name) ? "1" : kValues.at(name);
    CliOutcome o = parse_cli({"mcirun", "prog"}, fixed_env({{var, value}}));
    ASSERT_TRUE(o.args) << var;
    EXPECT_EQ(o.args->from_env.count(name), 1u) << var;
    EXPECT_EQ(o.args->named(name), var);
  }
  // torchrun reads no PET_ twin for these two, nor for mcirun's own options.
  for (const char* none : {"PET_LOGS_SPECS", "PET_NUMA_BINDING", "PET_GRACE", "PET_PREFIX", "PET_BIND"}) {
    const auto pets = pet_variables();
    EXPECT_EQ(std::count(pets.begin(), pets.end(), none), 0) << none;
  }
}

TEST(Cli, PetValuesAreDefaultsTheCommandLineOverrides) {
  const auto env = fixed_env({{"PET_NPROC_PER_NODE", "4"},
                              {"PET_NNODES", "2"},
                              {"PET_MASTER_ADDR", "node01"},
                              {"PET_STANDALONE", "1"},
                              {"PET_NO_PYTHON", "0"},
                              {"PET_ROLE", ""}});
  CliOutcome o = parse_cli({"mcirun", "--nnodes=3", "prog"}, env);
  ASSERT_TRUE(o.args);
  const CliArgs& a = *o.args;
  EXPECT_EQ(a.nproc_per_node, "4");
  EXPECT_EQ(a.named("nproc_per_node"), "PET_NPROC_PER_NODE");
  EXPECT_EQ(a.nnodes, "3") << "the command line wins";
  EXPECT_EQ(a.named("nnodes"), "--nnodes");
  EXPECT_EQ(a.master_addr, "node01");
  EXPECT_TRUE(a.standalone);
  EXPECT_FALSE(a.no_python) << "PET_NO_PYTHON=0 is off, as torchrun's check_env reads it";
  EXPECT_FALSE(a.role) << "an empty PET_ value counts as unset";
  std::string m;
  try {
    parse_cli({"mcirun", "prog"}, fixed_env({{"PET_STANDALONE", "yes"}}));
  } catch (const UsageError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("PET_STANDALONE='yes' is not valid: use 1 (--standalone) or 0"), std::string::npos) << m;
}

TEST(Cli, PrintCompletionWritesAScriptForEachShellTorchrunNames) {
  for (const char* shell : {"bash", "zsh", "tcsh"}) {
    CliOutcome o = parse_cli({"mcirun", "--print-completion", shell});
    EXPECT_FALSE(o.args.has_value());
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_NE(o.message.find("mcirun"), std::string::npos) << shell;
    EXPECT_NE(o.message.find("--nproc-per-node"), std::string::npos) << shell;
    EXPECT_NE(o.message.find("--local_ranks_filter"), std::string::npos) << shell;
  }
  EXPECT_NE(parse_cli({"mcirun", "--print_completion=bash"}).message.find("complete -o default -F _mcirun mcirun"),
            std::string::npos);
  std::string m;
  try {
    parse_cli({"mcirun", "--print-completion", "fish"});
  } catch (const UsageError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("--print-completion=fish: the shells are bash, zsh and tcsh"), std::string::npos) << m;
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
    for (const std::string& f : option_spellings()) EXPECT_NE(o.message.find(f), std::string::npos) << f;
    for (const std::string& v : pet_variables()) EXPECT_NE(o.message.find("[" + v + "]"), std::string::npos) << v;
  }
  EXPECT_EQ(usage_text(), parse_cli({"mcirun", "--help"}).message);
}

TEST(Cli, HelpSaysWhatEachStopSignalBecomes) {
  const std::string h = usage_text();
  for (const char* said :
       {"Ctrl-C (SIGINT) to mcirun is passed on to every process as SIGINT", "'except KeyboardInterrupt:'",
        "gets SIGTERM, and SIGKILL after another --grace",
        "SIGHUP or SIGQUIT to mcirun (or another of --signals-to-handle) is passed on as that signal,\nthen SIGKILL "
        "after --grace",
        "128+N after signal N"}) {
    EXPECT_NE(h.find(said), std::string::npos) << said << "\n" << h;
  }
}

}  // namespace
}  // namespace mci::launch
