#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch/ranks/child_process.hpp"
#include "launch/ranks/signals.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

std::string read_all(const Fd& fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
  return s;
}

int wait_for(pid_t pid) {
  int st = 0;
  EXPECT_EQ(::waitpid(pid, &st, 0), pid);
  return st;
}

ExecSpec sh(const std::string& script) { return {"/bin/sh", {"sh", "-c", script}}; }

TEST(ChildProcess, OutputOnTwoPipesOwnGroupEnvAndExitCode) {
  SignalFd signals;
  StartedChild c = start_child(sh("echo out $FOO; echo err >&2; ps -o pgid= -p $$; exit 3"), {"FOO=bar"}, signals);
  ASSERT_GT(c.pid, 0);
  const std::string out = read_all(c.out);
  EXPECT_EQ(read_all(c.err), "err\n");
  const int st = wait_for(c.pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  EXPECT_EQ(out.rfind("out bar\n", 0), 0u) << out;
  EXPECT_NE(out.find(std::to_string(c.pid)), std::string::npos) << "its own process group: " << out;
  signals.take();  // the SIGCHLD
}

TEST(ChildProcess, StartsOnTheCpusItIsGiven) {
  SignalFd signals;
  StartedChild c = start_child({"/bin/grep", {"grep", "Cpus_allowed_list", "/proc/self/status"}}, {}, signals, {0});
  EXPECT_EQ(read_all(c.out), "Cpus_allowed_list:\t0\n");
  wait_for(c.pid);
  signals.take();
}

TEST(ChildProcess, ChildStartsWithMcirunsOriginalSignalMask) {
  SignalFd signals;  // blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP here
  // grep itself, not through sh: dash clears the signal mask when it starts.
  StartedChild c = start_child({"/bin/grep", {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}}, {}, signals);
  const std::string out = read_all(c.out);
  wait_for(c.pid);
  EXPECT_NE(out.find("SigBlk:\t0000000000000000"), std::string::npos) << out;
  // SIGPIPE (bit 13) is ignored in mcirun, not in its children.
  EXPECT_EQ(out.find("SigIgn:\t0000000000001000"), std::string::npos) << out;
}

TEST(ChildProcess, ExecFailureIsAnErrorNotAProcess) {
  SignalFd signals;
  test::TempDir d;
  const std::string plain = d.file("plain", "data", 0644);
  try {
    start_child({"/no/such/file", {"myprog"}}, {}, signals);
    FAIL() << "no error";
  } catch (const CannotRun& e) {
    EXPECT_STREQ(e.what(), "cannot run 'myprog': No such file or directory");
  }
  try {
    start_child({plain, {plain}}, {}, signals);
    FAIL() << "no error";
  } catch (const CannotRun& e) {
    EXPECT_EQ(std::string(e.what()), "cannot run '" + plain + "': Permission denied");
  }
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "the failed children were reaped";
}

// mcirun names the rank that was already dying when the first failure came
// (its victims can be reaped before it): that rests on these two.
TEST(ChildProcess, AnExitingChildIsToldFromARunningOneAndReapedWithin) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t running = ::fork();
  if (running == 0) {
    ::close(ready[0]);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);  // it runs: no race with its start
  ::close(ready[0]);
  EXPECT_FALSE(process_exiting(running));
  EXPECT_FALSE(wait_for_exit(running, std::chrono::milliseconds(0)));  // nothing to reap yet

  ::kill(running, SIGKILL);
  // Killed, not yet reaped: a zombie, and the kernel says so at once.
  const auto st = wait_for_exit(running, std::chrono::seconds(10));
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFSIGNALED(*st));
  EXPECT_EQ(WTERMSIG(*st), SIGKILL);

  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(3);
  // Until it is reaped the child stays a zombie: exiting, whatever the load
  // (WNOWAIT waits for its end and leaves it unreaped).
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  EXPECT_TRUE(process_exiting(zombie));
  const auto z = wait_for_exit(zombie, std::chrono::seconds(10));
  ASSERT_TRUE(z);
  EXPECT_EQ(WEXITSTATUS(*z), 3);
  EXPECT_FALSE(process_exiting(zombie));  // gone: no such process
}

TEST(SignalFd, DeliversSignalsAsDataAndRestoresTheMask) {
  sigset_t before;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
  {
    SignalFd signals;
    ::raise(SIGHUP);
    ::raise(SIGTERM);
    const std::vector<int> got = signals.take();
    EXPECT_EQ(got.size(), 2u);
    EXPECT_NE(std::find(got.begin(), got.end(), SIGHUP), got.end());
    EXPECT_NE(std::find(got.begin(), got.end(), SIGTERM), got.end());
    EXPECT_TRUE(signals.take().empty());
  }
  sigset_t after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&after, SIGTERM), sigismember(&before, SIGTERM));
  EXPECT_EQ(sigismember(&after, SIGCHLD), sigismember(&before, SIGCHLD));
}

TEST(SignalName, NamesAndNumbers) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
}

}  // namespace
}  // namespace mci::launch
