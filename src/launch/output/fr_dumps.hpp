// Under mcirun --monitor, the ranks dump their flight recorders (in torch's
// format) when the page's button asks or a collective times out: mcirun
// gives them a signal to dump on (MCI_FR_DUMP_ON_SIGNAL=SIGUSR2) and a
// folder (MCI_FR_DUMP_DIR), unless the environment already names them
// (MCI_FR_DUMP_DIR, torch's TORCH_FR_DUMP_TEMP_FILE, MCI_FR_DUMP_ON_SIGNAL).
// A folder mcirun made is removed at the end when nothing was dumped.
#pragma once

#include <string>
#include <vector>

#include "common/env_lookup.hpp"

namespace mci::launch {

class FrDumps {
 public:
  explicit FrDumps(const EnvLookup& env);
  ~FrDumps();
  FrDumps(const FrDumps&) = delete;
  FrDumps& operator=(const FrDumps&) = delete;
  // Where the dumps go, for people ("/tmp/mcirun-fr-ab12/mci_trace_rank_N").
  const std::string& where() const { return where_; }
  // NAME=VALUE entries the ranks' environment gets.
  const std::vector<std::string>& env() const { return env_; }
  // The folder mcirun made for them, or "" when the environment named one.
  const std::string& made() const { return made_; }

 private:
  std::string made_;  // the folder mcirun made, or ""
  std::string where_;
  std::vector<std::string> env_;
};

}  // namespace mci::launch
