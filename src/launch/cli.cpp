#include "launch/cli.hpp"

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace mci::launch {

namespace {

constexpr const char* kDescription =
    "mcirun: start PROGRAM once per process of a job, on this node.\n"
    "It hosts the job's store on node 0, gives every process RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT and MCI_JOB_TOKEN, relays their\n"
    "output line by line, and stops them all when one fails or mcirun is interrupted.";

constexpr const char* kFooter =
    "PROGRAM is any executable (searched in PATH unless it contains a '/'); a PROGRAM ending\n"
    "in .py runs as 'python3 -u PROGRAM' (MCI_PYTHON names another interpreter) unless --no_python. Every word "
    "after PROGRAM is its own.\n"
    "\n"
    "Under srun (one mcirun per node: srun --ntasks-per-node=1 mcirun ...), --nnodes, --node_rank\n"
    "and --master_addr default to the step's node count, this node's index and the step's\n"
    "first node. Under mpirun (one per node), --nnodes and --node_rank come from\n"
    "OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK.\n"
    "\n"
    "Stopping: Ctrl-C (SIGINT) to mcirun is passed on to every process as SIGINT, so a Python\n"
    "program's 'except KeyboardInterrupt:' and 'finally:' run (as under torchrun); a process still\n"
    "running --grace seconds later gets SIGTERM, and SIGKILL after another --grace. SIGTERM or\n"
    "SIGHUP to mcirun is passed on as that signal, then SIGKILL after --grace. On a multi-node job\n"
    "every node's mcirun passes on the signal that one of them got. A second signal to mcirun\n"
    "while it stops the job sends SIGKILL at once. When a process fails, the others get SIGTERM,\n"
    "then SIGKILL after --grace.\n"
    "\n"
    "Exit status: 0 when every process exits 0; 1 when one fails (or mcirun cannot start them);\n"
    "2 for a bad command line; 128+N after signal N (SIGINT, SIGTERM, SIGHUP) stopped the job.\n"
    "\n"
    "Examples:\n"
    "  mcirun --nproc_per_node=2 ./labo\n"
    "  mcirun --standalone --nproc_per_node=cpu --prefix ./train --epochs 3\n"
    "  mcirun --nnodes=2 --node_rank=0 --master_addr=node01 --master_port=29531 ./train  (on node01)\n"
    "  mcirun --nnodes=2 --node_rank=1 --master_addr=node01 --master_port=29531 ./train  (on node02)";

// Both spellings torchrun accepts: --nproc_per_node and --nproc-per-node.
std::string names(const std::string& underscored) {
  std::string dashed = underscored;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed == underscored ? "--" + underscored : "--" + underscored + ",--" + dashed;
}

// Like argparse, a repeated option keeps its last value.
void text_option(CLI::App& app, const std::string& name, std::optional<std::string>& into, const std::string& type,
                 const std::string& help) {
  app.add_option_function<std::string>(
         names(name), [&into](const std::string& v) { into = v; }, help)
      ->type_name(type)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// CLI11 cannot tell that the words after the options are a program.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "\nUsage: mcirun [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

std::unique_ptr<CLI::App> make_app(CliArgs& a) {
  auto app = std::make_unique<CLI::App>(kDescription, "mcirun");
  app->footer(kFooter);
  app->prefix_command();  // the first word that is not ours starts the program's command
  app->formatter(std::make_shared<Formatter>());
  app->get_formatter()->column_width(38);
  app->add_option(names("nproc_per_node"), a.nproc_per_node,
                  "processes on this node: a number, cpu (one per usable CPU),\n"
                  "gpu (one per visible GPU) or auto (gpu if any, else cpu)")
      ->type_name("N|cpu|gpu|auto")
      ->default_str("1")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  text_option(*app, "nnodes", a.nnodes, "N", "number of nodes of the job (default 1, or from srun/mpirun)");
  text_option(*app, "node_rank", a.node_rank, "K", "index of this node, from 0 (default 0, or from srun/mpirun)");
  text_option(*app, "master_addr", a.master_addr, "HOST",
              "address of node 0, where the store listens (default 127.0.0.1)");
  text_option(*app, "master_port", a.master_port, "PORT", "port of the store on node 0 (default 29500)");
  text_option(*app, "rdzv_endpoint", a.rdzv_endpoint, "HOST[:PORT]",
              "where the store is, instead of --master_addr/--master_port\n"
              "(default port 29400)");
  text_option(*app, "rdzv_backend", a.rdzv_backend, "NAME", "static or c10d: accepted for torchrun scripts");
  text_option(*app, "rdzv_id", a.rdzv_id, "ID",
              "the job's id, given to the processes as TORCHELASTIC_RUN_ID (torchrun's meaning)");
  text_option(*app, "max_restarts", a.max_restarts, "0", "only 0: mcirun does not restart processes");
  text_option(*app, "monitor_interval", a.monitor_interval, "SECONDS",
              "accepted for torchrun scripts; unused (exits are seen at once)");
  app->add_flag(names("standalone"), a.standalone, "single node, store on 127.0.0.1 at a free port mcirun picks");
  app->add_option(names("grace"), a.grace,
                  "seconds between each signal and the next when stopping processes\n"
                  "(SIGINT, SIGTERM, SIGKILL after Ctrl-C; SIGTERM, SIGKILL after a failure)")
      ->type_name("SECONDS")
      ->default_str("3")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->add_flag(names("prefix"), a.prefix, "start every relayed line with '[rank N] '");
  app->add_flag(names("no_python"), a.no_python, "run a PROGRAM ending in .py directly, not with python3");
  app->add_option(names("bind"), a.bind,
                  "pin each process: none; numa (the CPUs of its GPU's NUMA node,\n"
                  "NUMA nodes in turn without GPUs); core (cores of its own)")
      ->type_name("none|numa|core")
      ->default_str("none")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return app;
}

}  // namespace

std::string usage_text() {
  CliArgs a;
  return make_app(a)->help();
}

CliOutcome parse_cli(const std::vector<std::string>& argv) {
  CliArgs a;
  auto app = make_app(a);
  // CLI11 takes the words in reverse order and without the program name.
  std::vector<std::string> words(argv.rbegin(), argv.rend());
  if (!words.empty()) words.pop_back();
  CliOutcome out;
  try {
    app->parse(words);
  } catch (const CLI::CallForHelp&) {
    out.message = app->help();
    out.exit_code = 0;
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("{}; run 'mcirun --help' for the options", e.what()));
  }
  std::vector<std::string> rest = app->remaining();
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
