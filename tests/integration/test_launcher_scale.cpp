// mcirun holds the crowd: 256 local ranks (on 2 cores: oversubscribed, as
// expected) start, join one group, all-reduce, relay their output in whole
// lines and leave nothing behind; a low open-file soft limit is raised and
// said. (8 network-namespace hosts x 32 ranks: scripts/netns_scale.sh.)
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "launcher_run.hpp"
#include "support/rank.hpp"
#include "support/sanitizers.hpp"
#include "support/scenario.hpp"

namespace mci::test {
namespace {

using namespace std::chrono_literals;

// Under the sanitizers (CI runs the suite under ASan) 256 instrumented
// processes would not fit the machine's memory: a quarter of the crowd.
constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;
constexpr int kRanks = kSanitized ? 64 : 256;
// mcirun needs ~320 descriptors for 64 ranks, ~1,100 for 256.
constexpr rlim_t kLowSoftLimit = kSanitized ? 256 : 1024;
constexpr int kLines = 8;
const std::string kFiller = "the crowd relays whole lines 0123456789 abcdefghijklmnopqrstuvwxyz";

MCI_SCENARIO(crowd) {
  auto pg = join();
  std::int64_t v = pg->rank();
  pg->all_reduce(mci::view(&v, 1), mci::ReduceOp::sum);
  const std::int64_t n = pg->size();
  if (v != n * (n - 1) / 2) {
    say(fmt::format("crowd rank {}: all_reduce gave {} instead of {}", pg->rank(), v, n * (n - 1) / 2));
    return exit_code::failed;
  }
  const char* dir = std::getenv("TEST_DIR");
  std::ofstream(fmt::format("{}/pid.{}", dir, pg->rank())) << ::getpid() << "\n";
  for (int i = 0; i < kLines; ++i) say(fmt::format("crowd rank {} line {} {}", pg->rank(), i, kFiller));
  return exit_code::ok;
}

// Sets this process's soft open-file limit (inherited by what it starts)
// for the life of the object.
class SoftFileLimit {
 public:
  explicit SoftFileLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit rl = saved_;
    rl.rlim_cur = soft;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &rl) == 0;
  }
  ~SoftFileLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }
  rlim_t hard() const { return saved_.rlim_max; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST(McirunAtScale, TwoHundredFiftySixLocalRanksJoinRelayAndLeaveNothing) {
  // Start mcirun under a soft limit below what the job needs, so that it
  // has to raise it (and say so).
  SoftFileLimit limit(kLowSoftLimit);
  if (!limit.ok() || (limit.hard() != RLIM_INFINITY && limit.hard() < 2048)) {
    GTEST_SKIP() << "the open-file hard limit (" << limit.hard() << ") leaves mcirun no room for 256 ranks";
  }
  Mcirun m({"--standalone", fmt::format("--nproc_per_node={}", kRanks), self_program(), "--scenario=crowd"},
           {{"MCI_TEST_TIMEOUT_MS", "240000"}, {"OMP_NUM_THREADS", "1"}});
  const int code = m.code(300s);
  const std::string err = m.err();
  ASSERT_EQ(code, 0) << "mcirun's stderr ends with:\n" << err.substr(err.size() > 4000 ? err.size() - 4000 : 0);
  EXPECT_NE(m.err().find(fmt::format("mcirun: raised the open-file soft limit from {} to", kLowSoftLimit)),
            std::string::npos)
      << m.err().substr(0, 2000);

  // Every line of every rank, whole and once.
  std::set<std::string> want;
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kLines; ++i) want.insert(fmt::format("crowd rank {} line {} {}", r, i, kFiller));
  }
  int broken = 0;
  for (const auto& l : lines_of(m.out())) {
    if (want.erase(l) == 1) continue;
    if (l.rfind("crowd", 0) == 0 && ++broken <= 5) ADD_FAILURE() << "broken or repeated line: '" << l << "'";
  }
  EXPECT_EQ(broken, 0);
  EXPECT_TRUE(want.empty()) << want.size() << " lines missing, e.g. '" << (want.empty() ? "" : *want.begin()) << "'";

  // Nothing left: no rank process, no shared-memory segment of theirs.
  const auto pids = recorded_pids(m, "pid.");
  EXPECT_EQ(pids.size(), static_cast<std::size_t>(kRanks));
  for (pid_t p : pids) EXPECT_TRUE(::kill(p, 0) != 0 && errno == ESRCH) << "rank process " << p << " still runs";
  std::set<std::string> prefixes;
  for (pid_t p : pids) prefixes.insert(fmt::format("mci-{}-", p));
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    for (const auto& pre : prefixes) EXPECT_NE(name.rfind(pre, 0), 0u) << "left behind: /dev/shm/" << name;
  }
}

// Connections at init are still there for whoever asks (MCI_CONNECT=eager):
// every pair connects before the first collective, over TCP.
TEST(McirunAtScale, EagerConnectionsStillFormTheGroup) {
  Mcirun m({"--standalone", "--nproc_per_node=8", self_program(), "--scenario=init"},
           {{"MCI_CONNECT", "eager"}, {"MCI_TRANSPORT", "tcp"}, {"MCI_TEST_TIMEOUT_MS", "60000"}});
  ASSERT_EQ(m.code(120s), 0) << m.all();
  for (int r = 0; r < 8; ++r) {
    EXPECT_NE(m.out().find(fmt::format("joined rank {} size 8 local_rank {}", r, r)), std::string::npos) << m.all();
  }
}

TEST(McirunAtScale, AnUnknownConnectionModeIsAConfigErrorNamingTheChoices) {
  Mcirun m({"--standalone", "--nproc_per_node=2", self_program(), "--scenario=init"},
           {{"MCI_CONNECT", "sometimes"}, {"MCI_TEST_TIMEOUT_MS", "30000"}});
  EXPECT_NE(m.code(60s), 0);
  EXPECT_NE(m.all().find("MCI_CONNECT='sometimes' is not a connection mode: use lazy"), std::string::npos) << m.all();
}

}  // namespace
}  // namespace mci::test
