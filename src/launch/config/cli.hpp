// mcirun's command line, as torchrun spells it (--x_y and --x-y, and each
// torchrun option's PET_X_Y twin in the environment), parsed into raw
// strings: turning them into a job (numbers, scheduler variables, the
// program's path) is resolve_job's work, where the messages can say what to do.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/env_lookup.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

struct CliArgs {
  // torchrun 2.15's options, in its --help order. Unset: neither on the
  // command line nor in PET_<NAME>.
  std::optional<std::string> nnodes;
  std::string nproc_per_node = "1";
  std::optional<std::string> rdzv_backend;  // static or c10d (mcirun's store is its own)
  std::optional<std::string> rdzv_endpoint;
  std::optional<std::string> rdzv_id;    // TORCHELASTIC_RUN_ID for the processes
  std::optional<std::string> rdzv_conf;  // KEY=VALUE,...: join_timeout/timeout is used
  bool standalone = false;
  std::optional<std::string> max_restarts;      // N >= 0: restarts of every process after a failure
  std::optional<std::string> monitor_interval;  // accepted and unused: exits are seen at once
  std::optional<std::string> start_method;      // spawn, fork or forkserver: mcirun always execs
  std::optional<std::string> event_log_handler;
  std::optional<std::string> role;  // ROLE_NAME
  bool module = false;              // -m: python -m PROGRAM
  bool no_python = false;
  bool run_path = false;  // python PROGRAM, whatever its name
  std::optional<std::string> log_dir;
  std::optional<std::string> redirects;  // -r: 0-3, or LOCAL_RANK:0-3,...
  std::optional<std::string> tee;        // -t: the same
  std::optional<std::string> log_line_prefix_template;
  std::optional<std::string> local_ranks_filter;
  std::optional<std::string> duplicate_stdout_filters;
  std::optional<std::string> duplicate_stderr_filters;
  std::optional<std::string> node_rank;
  std::optional<std::string> master_addr;
  std::optional<std::string> master_port;
  std::optional<std::string> local_addr;
  std::optional<std::string> logs_specs;
  std::optional<std::string> numa_binding;  // node, socket, exclusive, core-complex: --bind
  std::optional<std::string> signals_to_handle;
  std::optional<std::string> shutdown_timeout;  // --grace in torchrun's words
  bool virtual_local_rank = false;
  // mcirun's own.
  std::optional<std::string> grace;
  bool prefix = false;
  std::optional<std::string> bind;          // none, numa or core
  std::optional<std::string> on_rank_loss;  // stop, continue or replace
  std::optional<std::string> monitor;       // [HOST:]PORT, or "auto" for a bare --monitor
  std::vector<std::string> command;         // the program and its own arguments

  // The options whose value came from the environment: option -> PET_NAME.
  std::map<std::string, std::string> from_env;
  // How a message names an option: "--nnodes", or "PET_NNODES" when its
  // value came from there.
  std::string named(const std::string& option) const;
};

struct CliOutcome {
  // Set when mcirun should run the job; otherwise print `message` (help or a
  // shell completion script, on stdout with exit code 0).
  std::optional<CliArgs> args;
  std::string message;
  int exit_code = 0;
};

// Parses argv (argv[0] is mcirun's own name). Everything from the first
// word that is not one of mcirun's options (or after "--") is the program
// and its arguments, dashes included. A torchrun option missing from the
// command line takes its value from env's PET_<NAME> (PET_NPROC_PER_NODE,
// PET_STANDALONE=1, ...) when set and not empty, as torchrun does; the
// command line wins. Throws UsageError on bad syntax.
CliOutcome parse_cli(const std::vector<std::string>& argv, const EnvLookup& env);
// The same, reading no environment (for tests).
CliOutcome parse_cli(const std::vector<std::string>& argv);

std::string usage_text();

// A list value as torchrun writes them, split at each sep: "a,b" -> {"a",
// "b"}, "" -> {""}, "a," -> {"a", ""}.
std::vector<std::string> split_list(const std::string& text, char sep = ',');

// Every spelling of every option ("--nnodes", "-m", "--nproc-per-node",
// "--nproc_per_node", ...), and the PET_ twins of torchrun's.
std::vector<std::string> option_spellings();
std::vector<std::string> pet_variables();

// mcirun --print-completion SHELL: a completion script for bash, zsh or
// tcsh. Throws UsageError for another shell.
std::string completion_script(const std::string& shell);

}  // namespace mci::launch
