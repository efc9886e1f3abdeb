// Which groups this process has, for dumps in torch's flight-recorder format
// (diag/torch_dump.hpp): a dump is one file per process, named by its rank in
// the job, holding every live group, so a group registers its recorder while
// it lives. Dumps are written on a timeout (the rank that timed out, and every
// rank its hang report asks: HangResponder), on demand
// (ProcessGroup::dump_flight_recorder, mci_torch.dump_flight_recorder) and on
// a signal (MCI_FR_DUMP_ON_SIGNAL).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "diag/flight_recorder.hpp"
#include "diag/torch_dump.hpp"

namespace mci::diag {

// While it lives, `fr` is part of this process's dumps. `prefix`: where the
// group's automatic dumps go (a file is prefix + job rank), "" for none.
class DumpRegistration {
 public:
  DumpRegistration(DumpGroup group, const FlightRecorder& fr, std::string prefix);
  ~DumpRegistration();
  DumpRegistration(const DumpRegistration&) = delete;
  DumpRegistration& operator=(const DumpRegistration&) = delete;

  // Names the group as torch does (mci_torch: torch's group name and
  // description); what is empty is kept as it is.
  void rename(const std::string& name, const std::string& desc, const std::vector<int>& job_ranks);
  DumpGroup group() const;
  const std::string& prefix() const { return prefix_; }

  // Writes this process's dump to `prefix` (empty: this group's) + its rank
  // in the job; returns the file's path. Throws ConfigError with no
  // destination, Error when the file cannot be written.
  std::string dump(const std::string& prefix = {}) const;

 private:
  int id_;
  std::string prefix_;
};

// The automatic dumps (a timeout, a hang report's request): writes this
// process's dump where the group of `fr` dumps to, unless it has no
// destination or the file already holds the same bytes (every rank's report
// asks every rank). Returns the file's path, or "" when there is none (no
// destination, or it could not be written). Never throws (a failure is
// logged): it runs on error paths.
std::string dump_automatically(const FlightRecorder& fr, std::string_view why);

// The line the hang report ends with: where the file is and the torchfrtrace
// command that reads every rank's. Worded for any reader: a peer's
// PeerError quotes it.
std::string dump_hint(const std::string& path, const std::string& prefix);

// On `signo` (SIGUSR1 or SIGUSR2), every group with a destination dumps.
// Installed once per signal and process; the handler only writes a byte to
// a pipe (async-signal-safe), read by a thread of mci's that writes the
// files; a handler the program had is called after it.
void dump_on_signal(int signo);

}  // namespace mci::diag
