// mcirun on one node, run as a user runs it: the variables each process
// sees, exit codes and the failure summary, teardown (SIGTERM, grace,
// SIGKILL), signals sent to mcirun, a port already taken, the program's
// port held for the job, no orphans, and output relayed in whole lines.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "common/socket.hpp"
#include "launcher_run.hpp"
#include "mci/store.hpp"
#include "support/ports.hpp"
#include "support/rank.hpp"

namespace mci::test {
namespace {

MCI_SCENARIO(init) {
  auto pg = join();
  pg->barrier();
  say(fmt::format("joined rank {} size {} local_rank {}", pg->rank(), pg->size(), pg->local_rank()));
  return 0;
}

using namespace std::chrono_literals;

Strings sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// "K=V K=V ..." lines, one per rank, keyed by RANK.
std::map<int, std::map<std::string, std::string>> env_lines(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> ranks;
  for (const auto& line : lines_of(out)) {
    std::map<std::string, std::string> kv;
    std::istringstream in(line);
    for (std::string w; in >> w;) {
      const auto eq = w.find('=');
      if (eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
    }
    if (kv.count("RANK")) ranks[std::stoi(kv["RANK"])] = kv;
  }
  return ranks;
}

constexpr const char* kPrintEnv =
    "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
    "GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT "
    "MCI_STORE_HOSTED=$MCI_STORE_HOSTED MCI_JOB_TOKEN=$MCI_JOB_TOKEN OMP_NUM_THREADS=$OMP_NUM_THREADS";

TEST(Launcher, EveryProcessIsPlacedInTheJob) {
  Mcirun m(args({"--standalone", "--nproc-per-node=3"}, sh(kPrintEnv)));
  ASSERT_EQ(m.code(), 0) << m.all();
  auto ranks = env_lines(m.out());
  ASSERT_EQ(ranks.size(), 3u) << m.all();
  const std::string token = ranks[0]["MCI_JOB_TOKEN"];
  EXPECT_EQ(token.size(), 64u) << "a fresh token for the job: " << m.all();
  for (int r = 0; r < 3; ++r) {
    auto& kv = ranks[r];
    EXPECT_EQ(kv["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(kv["WORLD_SIZE"], "3");
    EXPECT_EQ(kv["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(kv["GROUP_RANK"], "0");
    EXPECT_EQ(kv["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(kv["MASTER_PORT"], ranks[0]["MASTER_PORT"]);
    EXPECT_GT(std::stoi(kv["MASTER_PORT"]), 0) << "--standalone: the port the store really got";
    EXPECT_EQ(kv["MCI_STORE_HOSTED"], "1");
    EXPECT_EQ(kv["MCI_JOB_TOKEN"], token);
    EXPECT_EQ(kv["OMP_NUM_THREADS"], "1");
  }
  EXPECT_TRUE(contains(m.err(), "mcirun: OMP_NUM_THREADS is not set")) << m.all();
  EXPECT_EQ(lines_of(m.err()).size(), 1u) << "one banner, nothing else: " << m.all();
}

TEST(Launcher, TheUsersTokenAndThreadCountAreKept) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2"}, sh(kPrintEnv)),
           {{"MCI_JOB_TOKEN", "s3cret"}, {"OMP_NUM_THREADS", "4"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  auto ranks = env_lines(m.out());
  ASSERT_EQ(ranks.size(), 2u) << m.all();
  for (auto& [r, kv] : ranks) {
    EXPECT_EQ(kv["MCI_JOB_TOKEN"], "s3cret");
    EXPECT_EQ(kv["OMP_NUM_THREADS"], "4");
  }
  EXPECT_EQ(m.err(), "") << "no banner when OMP_NUM_THREADS is set";
}

TEST(Launcher, RanksFormARealGroupOnTheLaunchersStore) {
  // The workers connect to the store mcirun hosts (MCI_STORE_HOSTED), with
  // the token it made, and run a barrier.
  Mcirun m({"--standalone", "--nproc_per_node=3", self_program(), "--scenario=init"},
           {{"MCI_TEST_TIMEOUT_MS", "20000"}});
  ASSERT_EQ(m.code(60s), 0) << m.all();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(contains(m.out(), fmt::format("joined rank {} size 3 local_rank {}", r, r))) << m.all();
  }
}

TEST(Launcher, SuccessIsExitCodeZeroAndSilence) {
  Mcirun m(args({"--standalone"}, sh("echo fine")));
  EXPECT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "fine\n");
  EXPECT_EQ(m.err(), "");
}

TEST(Launcher, AFailureStopsTheOthersAtOnceAndIsSummarized) {
  // Ranks 0 and 2 sleep; rank 1 writes 25 stderr lines and exits 3 once
  // the others are up. Pid files appear whole (written aside, then renamed),
  // so a rank that sees one can read it. The seed's hang: mcirun must end right away, not at
  // the next monitoring tick nor when the sleepers wake up.
  const std::string script =
      "echo $$ > $TEST_DIR/.pid.$RANK; mv $TEST_DIR/.pid.$RANK $TEST_DIR/pid.$RANK;"
      "if [ $RANK = 1 ]; then"
      "  while [ ! -e $TEST_DIR/pid.0 ] || [ ! -e $TEST_DIR/pid.2 ]; do sleep 0.01; done;"
      "  i=1; while [ $i -le 25 ]; do echo \"err line $i\" >&2; i=$((i+1)); done; exit 3;"
      "fi; exec sleep 30";
  Mcirun m(args({"--standalone", "--nproc_per_node=3"}, sh(script)));
  ASSERT_EQ(m.code(), 1) << m.all();
  EXPECT_LT(m.seconds(), 2.5) << "teardown must not wait for the sleepers: " << m.all();
  const std::string err = m.err();
  const std::string p0 = lines_of(m.file("pid.0")).at(0);
  const std::string p1 = lines_of(m.file("pid.1")).at(0);
  const std::string p2 = lines_of(m.file("pid.2")).at(0);
  EXPECT_TRUE(contains(err, "mcirun: rank 1 (pid " + p1 + ") failed: exit code 3\n")) << err;
  EXPECT_TRUE(contains(err, "mcirun: sent SIGTERM to rank 0 (pid " + p0 + ")\n")) << err;
  EXPECT_TRUE(contains(err, "mcirun: sent SIGTERM to rank 2 (pid " + p2 + ")\n")) << err;
  EXPECT_FALSE(contains(err, "SIGKILL")) << "sleep dies of SIGTERM: " << err;
  EXPECT_TRUE(contains(err, "job failed: rank 1 (local rank 1, node 0, host " + host_name() + ", pid " + p1 +
                                ") ended with exit code 3"))
      << err;
  EXPECT_TRUE(contains(err, "rank 0 (pid " + p0 + "): signal SIGTERM (sent by mcirun)")) << err;
  EXPECT_TRUE(contains(err, "last 20 line(s) of rank 1's stderr:")) << err;
  EXPECT_TRUE(contains(err, "mcirun: | err line 6\n")) << err;
  EXPECT_TRUE(contains(err, "mcirun: | err line 25\n")) << err;
  EXPECT_FALSE(contains(err, "mcirun: | err line 5\n")) << err;
  // The failed rank's own lines came first, then what mcirun did about it.
  EXPECT_LT(err.find("\nerr line 25\n"), err.find("failed: exit code 3")) << err;
  EXPECT_EQ(m.out(), "");
}

TEST(Launcher, ARankKilledByASignalIsNamedSo) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2"}, sh("if [ $RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 30")));
  ASSERT_EQ(m.code(), 1) << m.all();
  EXPECT_TRUE(contains(m.err(), "mcirun: rank 0 (pid")) << m.all();
  EXPECT_TRUE(contains(m.err(), "ended with signal SIGSEGV")) << m.all();
}

TEST(Launcher, ARankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  const std::string script =
      "if [ $RANK = 1 ]; then trap '' TERM; echo $$ > $TEST_DIR/.pid.1; mv $TEST_DIR/.pid.1 $TEST_DIR/pid.1; while :; "
      "do sleep 0.05; done; fi;"
      "while [ ! -e $TEST_DIR/pid.1 ]; do sleep 0.01; done; exit 1";
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--grace=0.5"}, sh(script)));
  ASSERT_EQ(m.code(), 1) << m.all();
  const std::string p1 = lines_of(m.file("pid.1")).at(0);
  const std::string err = m.err();
  EXPECT_TRUE(contains(err, "sent SIGTERM to rank 1 (pid " + p1 + ")")) << err;
  EXPECT_TRUE(contains(err, "sent SIGKILL to rank 1 (pid " + p1 + "): still running 0.5 s after SIGTERM")) << err;
  EXPECT_TRUE(contains(err, "rank 1 (pid " + p1 + "): signal SIGKILL (sent by mcirun)")) << err;
  EXPECT_LT(err.find("sent SIGTERM to rank 1"), err.find("sent SIGKILL to rank 1")) << err;
  EXPECT_GE(m.seconds(), 0.5);
  EXPECT_LT(m.seconds(), 3.0) << "SIGKILL at 0.5 s, not the default 3 s grace";
  EXPECT_FALSE(process_alive(std::stoi(p1)));
}

class Forwarding : public ::testing::TestWithParam<int> {
  DefaultSigint sigint_;
};

TEST_P(Forwarding, ASignalToMcirunStopsEveryRankAndGivesExitCode128PlusIt) {
  const int sig = GetParam();
  // Each rank says it is ready on stdout (the test waits for that line in
  // mcirun's output: relayed without delay), then records the signal it
  // gets: the one mcirun got, passed on.
  const std::string script =
      "trap 'echo got INT > $TEST_DIR/got.$RANK; exit 0' INT;"
      "trap 'echo got TERM > $TEST_DIR/got.$RANK; exit 0' TERM;"
      "trap 'echo got HUP > $TEST_DIR/got.$RANK; exit 0' HUP;"
      "echo ready $RANK; while :; do sleep 0.05; done";
  Mcirun m(args({"--standalone", "--nproc_per_node=2"}, sh(script)));
  ASSERT_TRUE(eventually([&] { return contains(m.out(), "ready 0\n") && contains(m.out(), "ready 1\n"); }, 5s))
      << m.all();
  ASSERT_EQ(::kill(m.pid(), sig), 0);
  ASSERT_EQ(m.code(), 128 + sig) << m.all();
  const std::string name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
  EXPECT_TRUE(contains(m.err(), "mcirun: received " + name + ": stopping the job")) << m.all();
  EXPECT_TRUE(contains(m.err(), "job stopped by " + name + " sent to mcirun")) << m.all();
  EXPECT_TRUE(contains(m.err(), "mcirun: sent " + name + " to rank 0 (pid")) << m.all();
  EXPECT_EQ(m.file("got.0"), "got " + name.substr(3) + "\n") << m.all();
  EXPECT_EQ(m.file("got.1"), "got " + name.substr(3) + "\n") << m.all();
}

INSTANTIATE_TEST_SUITE_P(Launcher, Forwarding, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

char proc_state(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto rp = stat.rfind(')');
  return rp == std::string::npos || rp + 2 >= stat.size() ? '?' : stat[rp + 2];
}

TEST(Launcher, CtrlZPausesTheRanksAndContinueResumesThem) {
  // The ranks lead their own process groups, so a terminal's SIGTSTP reaches
  // only mcirun, which must pass it on.
  Mcirun m(args({"--standalone", "--nproc_per_node=2"},
                sh("echo $$ > $TEST_DIR/.pid.$RANK; mv $TEST_DIR/.pid.$RANK $TEST_DIR/pid.$RANK; exec sleep 30")));
  ASSERT_TRUE(eventually([&] { return m.has_file("pid.0") && m.has_file("pid.1"); }, 5s)) << m.all();
  const auto pids = recorded_pids(m, "pid.");
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_EQ(::kill(m.pid(), SIGTSTP), 0);
  EXPECT_TRUE(eventually([&] { return proc_state(m.pid()) == 'T'; }, 5s)) << "mcirun itself stops";
  for (pid_t p : pids) EXPECT_TRUE(eventually([&] { return proc_state(p) == 'T'; }, 5s)) << "rank pid " << p;
  ASSERT_EQ(::kill(m.pid(), SIGCONT), 0);
  for (pid_t p : pids) EXPECT_TRUE(eventually([&] { return proc_state(p) == 'S'; }, 5s)) << "rank pid " << p;
  ASSERT_EQ(::kill(m.pid(), SIGTERM), 0);
  EXPECT_EQ(m.code(), 128 + SIGTERM) << m.all();
}

TEST(Launcher, APortInUseIsOneClearLineAndNoProcessStarts) {
  StoreServer taken(StoreServerOptions{"127.0.0.1", 0, ""});
  const std::string port = std::to_string(taken.port());
  Mcirun m(args({"--nproc_per_node=2", "--master_port=" + port}, sh("touch $TEST_DIR/started.$RANK")));
  ASSERT_EQ(m.code(), 1) << m.all();
  const auto err = lines_of(m.err());
  ASSERT_EQ(err.size(), 1u) << m.all();
  EXPECT_TRUE(contains(err[0], "mcirun: cannot host the job's store: port " + port + " on 127.0.0.1 is already in use"))
      << err[0];
  // mcirun reads --master_port, never MASTER_PORT (as torchrun): the hint names what works.
  EXPECT_TRUE(contains(err[0], "--master_port=N")) << err[0];
  EXPECT_TRUE(contains(err[0], "--standalone")) << err[0];
  EXPECT_FALSE(contains(err[0], "/ MASTER_PORT")) << err[0];
  EXPECT_FALSE(m.has_file("started.0"));
  EXPECT_FALSE(m.has_file("started.1"));
}

// Rank 0 of a program that hosts its own server on MASTER_PORT, as torch's
// TCPStore does: it says which port it got, binds it only when the test
// says so, then serves until the test releases it.
void mark(const std::string& name, const std::string& text) {
  const std::string dir = std::getenv("TEST_DIR");
  std::ofstream(dir + "/." + name) << text;
  std::filesystem::rename(dir + "/." + name, dir + "/" + name);
}

bool wait_file(const std::string& name) {
  const std::string path = std::string(std::getenv("TEST_DIR")) + "/" + name;
  return eventually([&] { return std::filesystem::exists(path); }, 30s);
}

MCI_SCENARIO(serve_master_port) {
  const int port = std::stoi(std::getenv("MASTER_PORT"));
  mark("port", std::to_string(port));
  if (!wait_file("bind")) return exit_code::failed;
  StoreServer server(StoreServerOptions{"0.0.0.0", port, ""});  // SO_REUSEADDR, like TCPStore and libuv
  mark("serving", std::to_string(server.port()));
  return wait_file("release") ? exit_code::ok : exit_code::failed;
}

// Whether a socket without SO_REUSEADDR can bind port on every address.
int plain_bind_errno(int port) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return ::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
}

TEST(Launcher, TheProgramsPortIsHeldForTheJobFromBeforeRankZeroBindsItUntilTheEnd) {
  // torchrun (and mcirun before) picked a free port and closed it before
  // rank 0 bound it: another job could be handed the same port meanwhile,
  // and two jobs' ranks met in one store ("RANK 1 is used by two processes").
  Mcirun m({"--standalone", "--nproc_per_node=1", self_program(), "--scenario=serve_master_port"});
  ASSERT_TRUE(eventually([&] { return m.has_file("port"); }, 20s)) << m.all();
  const int port = std::stoi(m.file("port"));
  EXPECT_EQ(plain_bind_errno(port), EADDRINUSE) << "nobody else gets the port before rank 0 binds it";
  std::ofstream(m.dir() + "/bind") << "go";
  ASSERT_TRUE(eventually([&] { return m.has_file("serving"); }, 20s)) << "rank 0 could not bind it: " << m.all();
  EXPECT_EQ(std::stoi(m.file("serving")), port);
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout = 5s;
  EXPECT_NO_THROW(TcpStore{o}.set("k", to_bytes("v"))) << "the rank's server answers on it";
  std::ofstream(m.dir() + "/release") << "go";
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(plain_bind_errno(port), 0) << "released with the job";
}

TEST(Launcher, NoOrphansAfterAFailure) {
  // Every rank starts a helper in the background (a data loader, say), then
  // waits; rank 0 fails once all four pids are recorded. The helpers get the
  // SIGTERM too (it goes to each rank's process group), so they can stop
  // cleanly, and none of them outlives mcirun.
  const std::string script =
      "sh -c 'trap \"echo term > $TEST_DIR/helper.$RANK; exit 0\" TERM; while :; do sleep 0.05; done' &"
      "echo $! >> $TEST_DIR/pids.$RANK; echo $$ >> $TEST_DIR/pids.$RANK;"
      "if [ $RANK = 0 ]; then"
      "  while [ $(cat $TEST_DIR/pids.* 2>/dev/null | wc -l) -lt 4 ]; do sleep 0.01; done; exit 1;"
      "fi; wait";
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--grace=1"}, sh(script)));
  ASSERT_EQ(m.code(), 1) << m.all();
  const auto pids = recorded_pids(m, "pids.");
  ASSERT_EQ(pids.size(), 4u) << m.all();
  for (pid_t p : pids) EXPECT_FALSE(process_alive(p)) << "pid " << p << " outlived mcirun: " << m.all();
  EXPECT_EQ(m.file("helper.0"), "term\n") << m.all();
  EXPECT_EQ(m.file("helper.1"), "term\n") << m.all();
}

TEST(Launcher, NoOrphansAfterSuccessEither) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2"}, sh("sleep 30 & echo $! > $TEST_DIR/bg.$RANK; exit 0")));
  ASSERT_EQ(m.code(), 0) << m.all();
  const auto pids = recorded_pids(m, "bg.");
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_FALSE(process_alive(p)) << "background pid " << p << " outlived mcirun";
}

TEST(Launcher, RanksDieWithMcirunEvenWhenItIsKilled) {
  Mcirun m(args({"--standalone", "--nproc_per_node=2"},
                sh("echo $$ > $TEST_DIR/.pid.$RANK; mv $TEST_DIR/.pid.$RANK $TEST_DIR/pid.$RANK; exec sleep 30")));
  ASSERT_TRUE(eventually([&] { return m.has_file("pid.0") && m.has_file("pid.1"); }, 5s)) << m.all();
  const auto pids = recorded_pids(m, "pid.");
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_EQ(::kill(m.pid(), SIGKILL), 0);
  EXPECT_EQ(m.code(), 1000 + SIGKILL);
  for (pid_t p : pids) {
    EXPECT_TRUE(eventually([&] { return !process_alive(p); }, 3s)) << "pid " << p << " survived mcirun's SIGKILL";
  }
}

TEST(Launcher, HeavyOutputFromFourRanksComesOutInWholeLines) {
  // yes | head writes 4 KiB blocks that cut lines anywhere; four ranks do it
  // at once on stdout and stderr. Every relayed line must be one whole line.
  const std::string text = "the quick brown fox jumps over the lazy dog 0123456789 ";
  const std::string script =
      "yes \"out $RANK " + text + "\" | head -n 20000 & yes \"err $RANK " + text + "\" | head -n 20000 >&2; wait";
  Mcirun m(args({"--standalone", "--nproc_per_node=4"}, sh(script)), {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(60s), 0) << m.err().substr(0, 2000);
  for (const auto& [stream, text_of] : std::map<std::string, std::string>{{"out", m.out()}, {"err", m.err()}}) {
    std::map<std::string, int> count;
    int bad = 0;
    for (const auto& l : lines_of(text_of)) {
      bool ok = false;
      for (int r = 0; r < 4; ++r) ok = ok || l == stream + " " + std::to_string(r) + " " + text;
      if (ok) {
        ++count[l];
      } else if (++bad < 5) {
        ADD_FAILURE() << stream << ": broken line '" << l.substr(0, 200) << "'";
      }
    }
    EXPECT_EQ(bad, 0) << stream;
    ASSERT_EQ(count.size(), 4u) << stream;
    for (const auto& [l, n] : count) EXPECT_EQ(n, 20000) << l;
  }
}

TEST(Launcher, PartialWritesAreJoinedAndPrefixedAndALastLineGetsItsNewline) {
  // Both ranks start a line, pause, finish it; the last line has no newline.
  const std::string script = "printf \"start-$RANK \"; sleep 0.3; printf \"end-$RANK\\n\"; printf \"tail-$RANK\"";
  Mcirun m(args({"--standalone", "--nproc_per_node=2", "--prefix"}, sh(script)), {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(m.code(), 0) << m.all();
  Strings got = lines_of(m.out());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (Strings{"[rank 0] start-0 end-0", "[rank 0] tail-0", "[rank 1] start-1 end-1", "[rank 1] tail-1"}))
      << m.all();
  EXPECT_EQ(m.out().back(), '\n');
}

TEST(Launcher, StdoutAndStderrStaySeparate) {
  Mcirun m(args({"--standalone", "--prefix"}, sh("echo to-out; echo to-err >&2")));
  ASSERT_EQ(m.code(), 0) << m.all();
  EXPECT_EQ(m.out(), "[rank 0] to-out\n");
  EXPECT_EQ(m.err(), "[rank 0] to-err\n");
}

TEST(Launcher, AProgramThatCannotRunIsOneLineAndExitCode1) {
  Mcirun missing({"--standalone", "no-such-program-xyz", "--flag"});
  EXPECT_EQ(missing.code(), 1);
  EXPECT_EQ(missing.err().rfind("mcirun: cannot run 'no-such-program-xyz': No such file or directory", 0), 0u)
      << missing.all();
  EXPECT_EQ(lines_of(missing.err()).size(), 1u) << missing.all();

  Mcirun script({"--standalone", "/bin/sh", "-c", "printf 'echo hi\\n' > $TEST_DIR/s; chmod +x $TEST_DIR/s"});
  ASSERT_EQ(script.code(), 0) << script.all();
  Mcirun noexec({"--standalone", script.dir() + "/s"});
  EXPECT_EQ(noexec.code(), 1);
  EXPECT_EQ(noexec.err(), "mcirun: cannot run '" + script.dir() +
                              "/s': Exec format error (a script needs a first "
                              "line like #!/bin/sh)\n");

  Mcirun dir({"--standalone", "/tmp"});
  EXPECT_EQ(dir.code(), 1);
  EXPECT_EQ(dir.err(), "mcirun: cannot run '/tmp': Is a directory\n");
}

TEST(Launcher, BadCommandLinesSayWhatToDoAndExit2) {
  const std::map<Strings, std::string> cases{
      {{"--nproc_per_node=zero", "/bin/true"}, "--nproc_per_node='zero' is not valid"},
      {{"--standalone", "--nnodes=2", "/bin/true"}, "--standalone runs one node"},
      {{"--nnodes=2", "/bin/true"}, "needs --node_rank on every node"},
      {{"--nnodes=2", "--node_rank=5", "/bin/true"}, "--node_rank=5 is not below --nnodes=2"},
      {{"--bogus", "/bin/true"}, "unknown option '--bogus'"},
      {{"--grace=soon", "/bin/true"}, "--grace='soon' is not valid"},
      {{"--nproc_per_node=2"}, "no program given"},
  };
  for (const auto& [argv, message] : cases) {
    Mcirun m(argv);
    EXPECT_EQ(m.code(), 2) << m.all();
    EXPECT_TRUE(contains(m.err(), "mcirun: ")) << m.all();
    EXPECT_TRUE(contains(m.err(), message)) << m.all();
  }
}

TEST(Launcher, HelpGoesToStdout) {
  Mcirun m({"--help"});
  EXPECT_EQ(m.code(), 0);
  EXPECT_TRUE(contains(m.out(), "Usage: mcirun [OPTIONS] PROGRAM [ARGS...]")) << m.all();
  EXPECT_EQ(m.err(), "");
}

}  // namespace
}  // namespace mci::test
