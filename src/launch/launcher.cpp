#include "launch/launcher.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/log.hpp"
#include "launch/job_run.hpp"
#include "launch/output/stream_relay.hpp"
#include "launch/ranks/guardian.hpp"
#include "launch/ranks/signals.hpp"
#include "mci/errors.hpp"

namespace mci::launch {

namespace {

// A child's pipe must never land on fd 0, 1 or 2 of mcirun (dup2 onto itself
// would keep O_CLOEXEC and the program would start without its output), so
// a closed standard fd is reopened on /dev/null first.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    const int n = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (n >= 0 && n != fd) {
      ::dup2(n, fd);
      ::close(n);
    }
  }
}

}  // namespace

int run_job(const JobConfig& job, const EnvLookup& env) {
  ensure_standard_fds();
  SignalFd signals(job.stop_signals);  // before the store's thread, which must inherit the mask
  // Before any thread (it forks) and before we become a subreaper (it must
  // not be our child): what cleans up if mcirun is killed.
  std::unique_ptr<Guardian> guardian = Guardian::start();
  // Orphans of the ranks (a helper whose rank died) become our children, so
  // mcirun sees them exit and can wait for a rank's process group to empty.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const int code = JobRun(job, env, signals, guardian.get()).run();
  guardian.reset();  // its goodbye, while the signals are still ours
  // A stop signal that came once the job had ended is read here rather than
  // left pending: when the signals are unblocked on the way out, its default
  // action would end mcirun by the signal instead of with the job's code
  // (~SignalFd drains again, just before it unblocks them).
  for (int sig : signals.take()) {
    if (is_stop_signal(sig))
      say(fmt::format("mcirun: {} came after the job had ended; nothing was left to stop", signal_name(sig)));
  }
  return code;
}

namespace {

// pet_env: where the PET_ twins of torchrun's flags are read.
int launch(const std::vector<std::string>& argv, const EnvLookup& pet_env) {
  const EnvLookup env = process_env();
  CliOutcome cli;
  try {
    cli = parse_cli(argv, pet_env);
  } catch (const UsageError& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 2;
  }
  if (!cli.args) {
    write_all(STDOUT_FILENO, cli.message);
    return cli.exit_code;
  }
  JobConfig job;
  try {
    job = resolve_job(*cli.args, env);
  } catch (const UsageError& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 2;
  } catch (const Error& e) {
    say(fmt::format("mcirun: {}", e.what()));
    return 1;
  }
  for (const auto& n : job.notices) say(n);
  try {
    return run_job(job, env);
  } catch (const std::exception& e) {
    say(fmt::format("mcirun: internal error: {}", e.what()));
    return 1;
  }
}

}  // namespace

int mcirun_main(const std::vector<std::string>& argv) { return launch(argv, process_env()); }

int run_local_job(int nproc, const std::vector<std::string>& command) {
  std::vector<std::string> argv{"mcirun", "--standalone", "--nproc_per_node=" + std::to_string(nproc), "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  // A tool's own ranks (mci-perf -g): the PET_ variables of a torchrun
  // user's environment are not meant for them.
  return launch(argv, fixed_env({}));
}

}  // namespace mci::launch
