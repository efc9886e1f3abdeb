#include "launch/config/cli.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <variant>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/env.hpp"

namespace mci::launch {

namespace {

constexpr const char* kDescription =
    "mcirun: start PROGRAM once per process of a job, on this node.\n"
    "It hosts the job's store on node 0, gives every process RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT and MCI_JOB_TOKEN, relays their\n"
    "output line by line, and stops them all when one fails or mcirun is interrupted.\n"
    "It takes every option of torchrun 2.15, and reads each one's PET_<NAME> twin from the\n"
    "environment when the command line does not give it (PET_NPROC_PER_NODE=2, PET_STANDALONE=1).";

constexpr const char* kFooter =
    "PROGRAM is any executable (searched in PATH unless it contains a '/'); a PROGRAM ending\n"
    "in .py runs as 'python3 -u PROGRAM' unless --no_python, and -m runs 'python3 -u -m PROGRAM'.\n"
    "MCI_PYTHON, else PYTHON_EXEC (torchrun's), names another interpreter. Every word after\n"
    "PROGRAM is its own.\n"
    "\n"
    "Under srun (one mcirun per node: srun --ntasks-per-node=1 mcirun ...), --nnodes, --node_rank\n"
    "and --master_addr default to the step's node count, this node's index and the step's\n"
    "first node. Under mpirun (one per node), --nnodes and --node_rank come from\n"
    "OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK.\n"
    "\n"
    "Stopping: Ctrl-C (SIGINT) to mcirun is passed on to every process as SIGINT, so a Python\n"
    "program's 'except KeyboardInterrupt:' and 'finally:' run (as under torchrun); a process still\n"
    "running --grace seconds later gets SIGTERM, and SIGKILL after another --grace. SIGTERM,\n"
    "SIGHUP or SIGQUIT to mcirun (or another of --signals-to-handle) is passed on as that signal,\n"
    "then SIGKILL after --grace. On a multi-node job every node's mcirun passes on the signal that\n"
    "one of them got. A second signal to mcirun while it stops the job sends SIGKILL at once. When\n"
    "a process fails, the others get SIGTERM, then SIGKILL after --grace (with --on-rank-loss=continue\n"
    "they go on, and the summary lists the lost ones).\n"
    "\n"
    "Exit status: 0 when every process exits 0 (with --on-rank-loss=continue: when at least one\n"
    "survived and every survivor exits 0); 1 when one fails (or mcirun cannot start them);\n"
    "2 for a bad command line; 128+N after signal N (SIGINT, SIGTERM, SIGHUP, ...) stopped the job.\n"
    "\n"
    "Examples:\n"
    "  mcirun --nproc_per_node=2 ./labo\n"
    "  mcirun --standalone --nproc_per_node=cpu --prefix ./train --epochs 3\n"
    "  mcirun --standalone --nproc-per-node=4 --log-dir=logs -t 3 -m trainer.main\n"
    "  mcirun --nnodes=2 --node_rank=0 --master_addr=node01 --master_port=29531 ./train  (on node01)\n"
    "  mcirun --nnodes=2 --node_rank=1 --master_addr=node01 --master_port=29531 ./train  (on node02)";

constexpr const char* kTorchrunGroup =
    "torchrun's options ([PET_NAME]: read from there when the command line does not give it, as torchrun does)";
constexpr const char* kOwnGroup = "mcirun's own options";

using Field = std::variant<std::string CliArgs::*, std::optional<std::string> CliArgs::*, bool CliArgs::*>;

// One row per option: its name as torchrun's dest (underscored), a short
// name, where it goes, whether torchrun reads a PET_ twin for it, and its help.
// Everything that must agree (the parser, the PET_ names, the completion
// scripts, option_spellings) is made from this table.
struct Row {
  const char* name;
  const char* short_name;
  Field field;
  bool torchrun;
  bool pet;
  const char* type;
  const char* help;
  const char* default_text = "";
};

// etcd is there when cpp-httplib was found at build time.
#ifdef MCI_HAVE_ETCD
constexpr const char* kRdzvBackendHelp =
    "static or c10d: the job's store on node 0's mcirun; etcd (or etcd-v2):\nthe job's store on an etcd cluster, "
    "which outlives any node";
#else
constexpr const char* kRdzvBackendHelp =
    "static or c10d: the job's store on node 0's mcirun; etcd (or etcd-v2):\nnot in this build (it needs "
    "cpp-httplib when built)";
#endif

const std::vector<Row>& rows() {
  static const std::vector<Row> table{
      {"nnodes", "", &CliArgs::nnodes, true, true, "N",
       "number of nodes of the job (default 1, or from srun/mpirun); MIN:MAX\nis elastic: each attempt runs on the "
       "nodes "
       "there (at least MIN),\na lost node is left out of the next one, a node started later joins\nthe next one, "
       "ranks and WORLD_SIZE are numbered again (node 0,\nwhich hosts the store, is always GROUP_RANK 0; on etcd no "
       "node hosts\nit)"},
      {"nproc_per_node", "", &CliArgs::nproc_per_node, true, true, "N|cpu|gpu|auto",
       "processes on this node: a number, cpu (one per usable CPU),\ngpu (one per visible GPU) or auto (gpu if any, "
       "else cpu)",
       "1"},
      {"rdzv_backend", "", &CliArgs::rdzv_backend, true, true, "NAME", kRdzvBackendHelp},
      {"rdzv_endpoint", "", &CliArgs::rdzv_endpoint, true, true, "HOST[:PORT]",
       "where the store is, instead of --master_addr/--master_port\n(default port 29400); with etcd, its members:\n"
       "HOST1:2379,HOST2:2379,..."},
      {"rdzv_id", "", &CliArgs::rdzv_id, true, true, "ID",
       "the job's id: TORCHELASTIC_RUN_ID for the processes, and the start of\nits --log-dir folder's name (default "
       "none; a fresh one with --standalone)"},
      {"rdzv_conf", "", &CliArgs::rdzv_conf, true, true, "KEY=VALUE,...",
       "join_timeout (or timeout): seconds a node waits for node 0's mcirun,\nand node 0 for MIN nodes (default 600); "
       "for MIN:MAX also\nlast_call_timeout (30), keep_alive_interval (5), keep_alive_max_attempt\n(3) and is_host "
       "(true: this node hosts the store); torchrun's other\nkeys are ignored, with a notice"},
      {"standalone", "", &CliArgs::standalone, true, true, "",
       "single node, store on 127.0.0.1 at a free port mcirun picks"},
      {"max_restarts", "", &CliArgs::max_restarts, true, true, "N",
       "after a failure, stop every process on every node and start them all\nagain, up to N times (default 0: a "
       "failure ends "
       "the job); the processes\nread the attempt in TORCHELASTIC_RESTART_COUNT"},
      {"monitor_interval", "", &CliArgs::monitor_interval, true, true, "SECONDS",
       "accepted for torchrun scripts; unused (exits are seen at once)"},
      {"start_method", "", &CliArgs::start_method, true, true, "spawn|fork|forkserver",
       "accepted: mcirun starts every process as a fresh program (fork and\nexec, as spawn does); fork and forkserver "
       "get a notice"},
      {"event_log_handler", "", &CliArgs::event_log_handler, true, true, "NAME",
       "accepted: mcirun records no torchelastic events (null, the default,\nsays nothing; another name gets a "
       "notice)"},
      {"role", "", &CliArgs::role, true, true, "ROLE", "the processes' ROLE_NAME (default: default)"},
      {"module", "-m", &CliArgs::module, true, true, "", "run PROGRAM as a Python module: python3 -u -m PROGRAM ARGS"},
      {"no_python", "", &CliArgs::no_python, true, true, "", "run a PROGRAM ending in .py directly, not with python3"},
      {"run_path", "", &CliArgs::run_path, true, true, "",
       "run PROGRAM with Python whatever its name: python3 -u PROGRAM ARGS\n(torchrun's runpy.run_path); wins over "
       "--no_python and -m"},
      {"log_dir", "", &CliArgs::log_dir, true, true, "DIR",
       "each process's logs go under DIR/RDZV_ID_XXXXXX/attempt_0/LOCAL_RANK/:\nstdout.log and stderr.log (with -r "
       "or -t), error.json"},
      {"redirects", "-r", &CliArgs::redirects, true, true, "0-3|MAP",
       "streams sent to their log file instead of the console: 1 stdout,\n2 stderr, 3 both, 0 none; or per local "
       "rank, e.g. 0:3,1:2\n(in --log-dir, else in a folder mcirun makes and names)"},
      {"tee", "-t", &CliArgs::tee, true, true, "0-3|MAP",
       "streams written to their log file and to the console (as -r)"},
      {"log_line_prefix_template", "", &CliArgs::log_line_prefix_template, true, true, "TEMPLATE",
       "the start of every console line, with ${rank}, ${local_rank},\n${role_name} and ${hostname} (default, on tee'd "
       "streams only:\n[${role_name}${local_rank}]:, or TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)"},
      {"local_ranks_filter", "", &CliArgs::local_ranks_filter, true, true, "R,R,...",
       "show only these local ranks' output on the console (log files keep\nall of it)"},
      {"duplicate_stdout_filters", "", &CliArgs::duplicate_stdout_filters, true, true, "TEXT,...",
       "tee'd stdout lines holding one of these also go to\nfiltered_stdout.log in the log folder (',,' is a comma)"},
      {"duplicate_stderr_filters", "", &CliArgs::duplicate_stderr_filters, true, true, "TEXT,...",
       "the same for stderr (filtered_stderr.log)"},
      {"node_rank", "", &CliArgs::node_rank, true, true, "K",
       "index of this node, from 0 (default 0, or from srun/mpirun); with\n--nnodes MIN:MAX only 0 (hosts the store) "
       "or not: GROUP_RANK is\ngiven at each attempt (ignored on etcd)"},
      {"master_addr", "", &CliArgs::master_addr, true, true, "HOST",
       "address of node 0, where the store listens (default 127.0.0.1)"},
      {"master_port", "", &CliArgs::master_port, true, true, "PORT", "port of the store on node 0 (default 29500)"},
      {"local_addr", "", &CliArgs::local_addr, true, true, "HOST",
       "on node 0: the MASTER_ADDR every process of the job gets (default:\n--master_addr); other nodes: accepted, "
       "unused"},
      {"logs_specs", "", &CliArgs::logs_specs, true, false, "NAME",
       "accepted: mcirun writes torchrun's default layout (DefaultLogsSpecs)\nand loads no plugin (a notice says so)"},
      {"numa_binding", "", &CliArgs::numa_binding, true, false, "node|socket|exclusive|core-complex",
       "pin each process near its GPU: node and socket as --bind numa,\nexclusive and core-complex as --bind core"},
      {"signals_to_handle", "", &CliArgs::signals_to_handle, true, true, "SIGNAL,...",
       "signals mcirun passes on to every process to stop the job\n(default SIGTERM,SIGINT,SIGHUP,SIGQUIT; SIGINT, "
       "SIGTERM and SIGHUP\nalways are)"},
      {"shutdown_timeout", "", &CliArgs::shutdown_timeout, true, true, "SECONDS",
       "torchrun's name for --grace (TORCH_ELASTIC_SHUTDOWN_TIMEOUT when\nneither is given)"},
      {"virtual_local_rank", "", &CliArgs::virtual_local_rank, true, true, "",
       "LOCAL_RANK=0 for every process, each seeing only its own GPU\n(CUDA_VISIBLE_DEVICES=its GPU)"},
      {"grace", "", &CliArgs::grace, false, false, "SECONDS",
       "seconds between each signal and the next when stopping processes\n(SIGINT, SIGTERM, SIGKILL after Ctrl-C; "
       "SIGTERM, SIGKILL after a failure)",
       "3"},
      {"prefix", "", &CliArgs::prefix, false, false, "", "start every relayed line with '[rank N] '"},
      {"bind", "", &CliArgs::bind, false, false, "none|numa|core",
       "pin each process: none; numa (the CPUs of its GPU's NUMA node,\nNUMA nodes in turn without GPUs); core "
       "(cores of its own)",
       "none"},
      {"on_rank_loss", "", &CliArgs::on_rank_loss, false, false, "stop|continue|replace",
       "what a rank's loss (a non-zero exit, a signal) does: stop (every\nprocess on every node stops; --max-restarts "
       "starts them again),\ncontinue (the other ranks go on; MCI_ON_RANK_LOSS tells them) or\nreplace (the others "
       "go on and a new process takes the lost one's place,\nwith MCI_REPLACEMENT=K; at most --max-restarts per node, "
       "default 3)",
       "stop"},
      {"monitor", "", &CliArgs::monitor, false, false, "[HOST:]PORT",
       "serve a live page of the job from node 0 (its ranks, who waits for\nwhom, charts; JSON at /api/v1/job, "
       "Prometheus at /metrics): on\n127.0.0.1 at a free port for a bare --monitor (the URL is printed);\nanother "
       "HOST needs MCI_JOB_TOKEN (or MCI_MONITOR_OPEN=1) [MCI_MONITOR]"},
  };
  return table;
}

constexpr const char* kCompletionShells = "bash|zsh|tcsh";

std::string dashed(const std::string& underscored) {
  std::string d = underscored;
  std::replace(d.begin(), d.end(), '_', '-');
  return d;
}

std::string pet_name(const std::string& underscored) {
  std::string n = "PET_" + underscored;
  for (auto& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return n;
}

// Both spellings torchrun accepts (--nproc_per_node and --nproc-per-node),
// and the short name.
std::vector<std::string> spellings_of(const std::string& name, const std::string& short_name) {
  std::vector<std::string> out;
  if (!short_name.empty()) out.push_back(short_name);
  out.push_back("--" + name);
  if (dashed(name) != name) out.push_back("--" + dashed(name));
  return out;
}

std::string cli11_names(const std::string& name, const std::string& short_name) {
  std::string joined;
  for (const auto& s : spellings_of(name, short_name)) joined += (joined.empty() ? "" : ",") + s;
  return joined;
}

std::string help_of(const Row& r) {
  if (!r.pet) return r.help;
  return fmt::format("{} [{}]", r.help, pet_name(r.name));
}

// CLI11 cannot tell that the words after the options are a program.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "\nUsage: mcirun [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

struct App {
  std::unique_ptr<CLI::App> app;
  std::vector<CLI::Option*> options;  // one per row
  CLI::Option* completion = nullptr;
};

App make_app(CliArgs& a, std::optional<std::string>& completion) {
  App out;
  out.app = std::make_unique<CLI::App>(kDescription, "mcirun");
  CLI::App& app = *out.app;
  app.footer(kFooter);
  app.prefix_command();  // the first word that is not ours starts the program's command
  app.formatter(std::make_shared<Formatter>());
  app.get_formatter()->column_width(40);
  for (const Row& r : rows()) {
    const std::string names = cli11_names(r.name, r.short_name);
    const std::string help = help_of(r);
    CLI::Option* o = nullptr;
    if (auto* flag = std::get_if<bool CliArgs::*>(&r.field)) {
      o = app.add_flag(names, a.**flag, help);
    } else {
      auto set = [&a, field = r.field](const std::string& v) {
        if (auto* s = std::get_if<std::string CliArgs::*>(&field)) a.** s = v;
        if (auto* s = std::get_if<std::optional<std::string> CliArgs::*>(&field)) a.** s = v;
      };
      // Like argparse, a repeated option keeps its last value.
      o = app.add_option_function<std::string>(names, set, help)
              ->type_name(r.type)
              ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      if (*r.default_text) o->default_str(r.default_text);
    }
    o->group(r.torchrun ? kTorchrunGroup : kOwnGroup);
    out.options.push_back(o);
  }
  out.completion =
      app.add_option_function<std::string>(
             "--print-completion,--print_completion", [&completion](const std::string& v) { completion = v; },
             "print a shell completion script for mcirun and exit")
          ->type_name(kCompletionShells)
          ->group(kTorchrunGroup);
  return out;
}

// PET_<NAME> for each torchrun option the command line left out, as
// torchrun's env and check_env actions read them (an empty value counts as
// unset here, where torchrun would fail on it or treat it as a value).
void fill_from_env(CliArgs& a, const App& app, const EnvLookup& env) {
  for (std::size_t i = 0; i < rows().size(); ++i) {
    const Row& r = rows()[i];
    if (!r.pet || app.options[i]->count() > 0) continue;
    const std::string var = pet_name(r.name);
    const auto v = env(var);
    if (!v || v->empty()) continue;
    if (auto* flag = std::get_if<bool CliArgs::*>(&r.field)) {
      const auto n = parse_int(*v);
      if (!n) {
        throw UsageError(fmt::format("{}='{}' is not valid: use 1 (--{}) or 0 (not), as torchrun reads it", var, *v,
                                     dashed(r.name)));
      }
      a.** flag = *n != 0;
    } else if (auto* s = std::get_if<std::string CliArgs::*>(&r.field)) {
      a.** s = *v;
    } else if (auto* o = std::get_if<std::optional<std::string> CliArgs::*>(&r.field)) {
      a.** o = *v;
    }
    a.from_env[r.name] = var;
  }
}

}  // namespace

std::string CliArgs::named(const std::string& option) const {
  const auto it = from_env.find(option);
  return it != from_env.end() ? it->second : "--" + option;
}

std::string usage_text() {
  CliArgs a;
  std::optional<std::string> completion;
  return make_app(a, completion).app->help();
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::vector<std::string> option_spellings() {
  std::vector<std::string> out{"-h", "--help"};
  for (const Row& r : rows()) {
    for (auto& s : spellings_of(r.name, r.short_name)) out.push_back(std::move(s));
  }
  out.insert(out.end(), {"--print-completion", "--print_completion"});
  return out;
}

std::vector<std::string> pet_variables() {
  std::vector<std::string> out;
  for (const Row& r : rows()) {
    if (r.pet) out.push_back(pet_name(r.name));
  }
  return out;
}

std::string completion_script(const std::string& shell) {
  std::string words;
  for (const auto& s : option_spellings()) words += (words.empty() ? "" : " ") + s;
  if (shell == "bash") {
    return fmt::format(
        "# bash completion for mcirun (mcirun --print-completion bash)\n"
        "_mcirun() {{\n"
        "  local cur=${{COMP_WORDS[COMP_CWORD]}}\n"
        "  if [[ $cur == -* ]]; then\n"
        "    COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))\n"
        "  fi\n"
        "}}\n"
        "complete -o default -F _mcirun mcirun\n",
        words);
  }
  if (shell == "zsh") {
    return fmt::format(
        "#compdef mcirun\n"
        "# zsh completion for mcirun (mcirun --print-completion zsh > ~/.zsh/completions/_mcirun)\n"
        "if [[ $PREFIX == -* ]]; then\n"
        "  compadd -- {}\n"
        "else\n"
        "  _files\n"
        "fi\n",
        words);
  }
  if (shell == "tcsh") {
    return fmt::format("# tcsh completion for mcirun (mcirun --print-completion tcsh)\ncomplete mcirun 'c/-/({})/'\n",
                       words);
  }
  throw UsageError(fmt::format("--print-completion={}: the shells are bash, zsh and tcsh", shell));
}

CliOutcome parse_cli(const std::vector<std::string>& argv) { return parse_cli(argv, fixed_env({})); }

// A bare --monitor (its value is optional) before the program becomes
// --monitor=auto: CLI11 would otherwise take the program's name as its
// value. Words after the program are the program's, whatever they are.
std::vector<std::string> with_bare_monitor(std::vector<std::string> argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& w = argv[i];
    if (w == "--" || w.empty() || w[0] != '-') break;
    if (w == "--monitor") {
      argv[i] = "--monitor=auto";
      continue;
    }
    if (w.find('=') != std::string::npos) continue;
    for (const Row& r : rows()) {
      if (std::holds_alternative<bool CliArgs::*>(r.field)) continue;
      const auto names = spellings_of(r.name, r.short_name);
      if (std::find(names.begin(), names.end(), w) != names.end()) {
        ++i;  // its value
        break;
      }
    }
  }
  return argv;
}

CliOutcome parse_cli(const std::vector<std::string>& given, const EnvLookup& env) {
  CliArgs a;
  std::optional<std::string> completion;
  App app = make_app(a, completion);
  const std::vector<std::string> argv = with_bare_monitor(given);
  // CLI11 takes the words in reverse order and without the program name.
  std::vector<std::string> words(argv.rbegin(), argv.rend());
  if (!words.empty()) words.pop_back();
  CliOutcome out;
  try {
    app.app->parse(words);
  } catch (const CLI::CallForHelp&) {
    out.message = app.app->help();
    out.exit_code = 0;
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("{}; run 'mcirun --help' for the options", e.what()));
  }
  if (completion) {
    out.message = completion_script(*completion);
    return out;
  }
  fill_from_env(a, app, env);
  std::vector<std::string> rest = app.app->remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError(
        fmt::format("unknown option '{}': run 'mcirun --help' for the options (a program whose name starts "
                    "with '-' goes after '--')",
                    rest.front()));
  }
  if (rest.empty()) {
    throw UsageError(
        "no program given: mcirun [OPTIONS] PROGRAM [ARGS...], e.g. "
        "mcirun --nproc_per_node=2 ./labo");
  }
  a.command = std::move(rest);
  out.args = std::move(a);
  return out;
}

}  // namespace mci::launch
