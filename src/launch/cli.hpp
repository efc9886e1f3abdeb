// mcirun's command line, as torchrun spells it (--x_y and --x-y), parsed into
// raw strings: turning them into a job (numbers, scheduler variables, the
// program's path) is resolve_job's work, where the messages can say what to do.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mci/errors.hpp"

namespace mci::launch {

// A command line mcirun cannot make sense of; mcirun exits 2 (like argparse).
class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

struct CliArgs {
  std::string nproc_per_node = "1";
  std::optional<std::string> nnodes;
  std::optional<std::string> node_rank;
  std::optional<std::string> master_addr;
  std::optional<std::string> master_port;
  std::optional<std::string> rdzv_endpoint;
  std::optional<std::string> rdzv_backend;      // accepted for torchrun scripts: static or c10d
  std::optional<std::string> rdzv_id;           // TORCHELASTIC_RUN_ID for the processes
  std::optional<std::string> max_restarts;      // only 0: mcirun never restarts workers
  std::optional<std::string> monitor_interval;  // accepted and unused: exits are seen at once
  bool standalone = false;
  std::string grace = "3";
  bool prefix = false;
  bool no_python = false;
  std::string bind = "none";         // none, numa or core
  std::vector<std::string> command;  // the program and its own arguments
};

struct CliOutcome {
  // Set when mcirun should run the job; otherwise print `message` (help on
  // stdout with exit code 0).
  std::optional<CliArgs> args;
  std::string message;
  int exit_code = 0;
};

// Parses argv (argv[0] is mcirun's own name). Everything from the first
// word that is not one of mcirun's options (or after "--") is the program
// and its arguments, dashes included. Throws UsageError on bad syntax.
CliOutcome parse_cli(const std::vector<std::string>& argv);

std::string usage_text();

}  // namespace mci::launch
