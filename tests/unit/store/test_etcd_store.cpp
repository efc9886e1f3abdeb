// The job's store on a real etcd (Debian's etcd-server, v3 API): the Store
// contract the TCP store's tests hold (test_store.cpp), one job's keys apart
// from another's, a wrong endpoint as a clear error, and init's agreements
// (agree(), store/all_ranks.hpp) run on it unchanged: a second store is one
// class behind the interface. Skipped where etcd is not installed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "../../support/ports.hpp"
#include "common/deadline.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"
#include "store/etcd_store.hpp"

extern char** environ;

namespace mci {
namespace {

using namespace std::chrono_literals;

std::string find_etcd() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/etcd";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// One etcd member on loopback, in a folder of its own, ended (and its
// folder removed) when the suite ends.
class EtcdProcess {
 public:
  explicit EtcdProcess(const std::string& etcd) {
    // On tmpfs: etcd syncs every write to its log, which on this disk costs
    // tens of ms a write (the tests make hundreds). Not named mci-*, which
    // the leak checks of other tests look for.
    char tmpl[] = "/dev/shm/etcd-test-XXXXXX";
    char fallback[] = "/tmp/etcd-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    dir_ = made ? made : ::mkdtemp(fallback);
    client_port_ = test::free_port();
    int peer = test::free_port();
    while (peer == client_port_) peer = test::free_port();
    const std::string client = fmt::format("http://127.0.0.1:{}", client_port_);
    const std::string peer_url = fmt::format("http://127.0.0.1:{}", peer);
    std::vector<std::string> args = {etcd,
                                     "--name=t",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=t=" + peer_url};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    const std::string log = dir_ + "/etcd.log";
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT, 0600);
    if (posix_spawn(&pid_, etcd.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~EtcdProcess() {
    stop(SIGTERM);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  std::string endpoint() const { return fmt::format("127.0.0.1:{}", client_port_); }
  bool started() const { return pid_ > 0; }

 private:
  std::string dir_;
  int client_port_ = 0;
  pid_t pid_ = -1;
};

class EtcdStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string etcd = find_etcd();
    if (etcd.empty()) return;
    etcd_ = std::make_unique<EtcdProcess>(etcd);
    // Up once it answers (bounded: 20 s).
    const Deadline dl(20000ms);
    while (etcd_->started() && !dl.expired()) {
      try {
        EtcdStoreOptions o;
        o.endpoints = {etcd_->endpoint()};
        o.job_id = "probe";
        o.request_timeout = 500ms;
        EtcdStore probe(o);
        ready_ = true;
        return;
      } catch (const std::exception& e) {
        last_error_ = e.what();
        std::this_thread::sleep_for(50ms);
      }
    }
  }
  static void TearDownTestSuite() { etcd_.reset(); }

  void SetUp() override {
    if (find_etcd().empty()) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
    ASSERT_TRUE(ready_) << "etcd did not start on " << (etcd_ ? etcd_->endpoint() : "?") << ": " << last_error_;
  }

  // A client of this test's own job (its keys apart from every other test's).
  std::shared_ptr<EtcdStore> client(std::chrono::milliseconds t = 5000ms, std::string job = "") {
    EtcdStoreOptions o;
    o.endpoints = {etcd_->endpoint()};
    o.job_id = job.empty() ? ::testing::UnitTest::GetInstance()->current_test_info()->name() : job;
    o.timeout = t;
    return std::make_shared<EtcdStore>(o);
  }

  static std::unique_ptr<EtcdProcess> etcd_;
  static bool ready_;
  static std::string last_error_;
};

std::unique_ptr<EtcdProcess> EtcdStoreTest::etcd_;
bool EtcdStoreTest::ready_ = false;
std::string EtcdStoreTest::last_error_;

TEST_F(EtcdStoreTest, SetGetRemoveAndCount) {
  auto s = client();
  s->set("a", to_bytes("1"));
  s->set("b", to_bytes("two"));
  EXPECT_EQ(to_string(s->get("b")), "two");
  EXPECT_EQ(s->num_keys(), 2);
  EXPECT_TRUE(s->check({"a", "b"}));
  EXPECT_FALSE(s->check({"a", "zzz"}));
  EXPECT_TRUE(s->remove("a"));
  EXPECT_FALSE(s->remove("a"));
  EXPECT_EQ(s->num_keys(), 1);
  s->set("b", to_bytes(""));
  EXPECT_EQ(s->get("b").size(), 0u);  // an empty value exists
  const StoreValue binary = {0, 255, 10, 13, 0, 61};
  s->set("bin", binary);
  EXPECT_EQ(s->get("bin"), binary);
}

TEST_F(EtcdStoreTest, GetWaitsForAKeySetByAnotherClient) {
  auto reader = client();
  auto writer = client();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    writer->set("other", to_bytes("x"));  // a change that is not the key: the wait goes on
    std::this_thread::sleep_for(50ms);
    writer->set("late", to_bytes("here"));
  });
  EXPECT_EQ(to_string(reader->get("late")), "here");
  t.join();
}

TEST_F(EtcdStoreTest, GetAndWaitTimeOutWithTheKeyNamed) {
  auto s = client(200ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s->get("never");
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("Timed out waiting 200ms for store key 'never' on etcd"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  try {
    s->wait({"x", "y"}, 100ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'x', 'y'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s->get("never", -5ms), TimeoutError);
  s->set("x", to_bytes("1"));
  s->set("y", to_bytes("1"));
  s->wait({"x", "y"}, 100ms);
}

TEST_F(EtcdStoreTest, ConcurrentAddsFromManyClientsAreAtomic) {
  constexpr int kClients = 4, kAdds = 40;
  std::vector<std::thread> ts;
  for (int c = 0; c < kClients; ++c) {
    ts.emplace_back([&] {
      auto s = client();
      for (int i = 0; i < kAdds; ++i) s->add("counter", 1);
    });
  }
  for (auto& t : ts) t.join();
  auto s = client();
  EXPECT_EQ(s->add("counter", 0), kClients * kAdds);
  EXPECT_EQ(to_string(s->get("counter")), std::to_string(kClients * kAdds));
  EXPECT_EQ(s->add("counter", -5), kClients * kAdds - 5);
  s->set("text", to_bytes("abc"));
  EXPECT_THROW(s->add("text", 1), Error);
}

TEST_F(EtcdStoreTest, CompareSetOnlyReplacesTheExpectedValue) {
  auto s = client();
  EXPECT_EQ(to_string(s->compare_set("k", {}, to_bytes("first"))), "first");
  EXPECT_EQ(to_string(s->compare_set("k", {}, to_bytes("second"))), "first");
  EXPECT_EQ(to_string(s->compare_set("k", to_bytes("first"), to_bytes("third"))), "third");
  EXPECT_EQ(to_string(s->compare_set("k", to_bytes("nope"), to_bytes("x"))), "third");
  EXPECT_EQ(s->compare_set("missing", to_bytes("a"), to_bytes("b")).size(), 0u);
}

TEST_F(EtcdStoreTest, AppendGrowsTheValueAtomicallyAndAnswersIt) {
  auto a = client();
  auto b = client();
  EXPECT_EQ(to_string(a->append("list", to_bytes("1;"))), "1;");
  EXPECT_EQ(to_string(b->append("list", to_bytes("2;"))), "1;2;");
  EXPECT_EQ(to_string(a->append("list", {})), "1;2;");
  EXPECT_EQ(a->append("nothing", {}).size(), 0u);
  EXPECT_FALSE(a->check({"nothing"}));  // reading does not create it
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      auto c = client();
      for (int j = 0; j < 20; ++j) c->append("many", to_bytes(std::to_string(i)));
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(a->get("many").size(), 80u);
}

TEST_F(EtcdStoreTest, GetRangeWaitsForEveryKeyOrTheStopKey) {
  auto s = client();
  auto w = client();
  std::thread t([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(20ms);
      w->set(fmt::format("r/{}", i), to_bytes(std::to_string(i * 10)));
    }
  });
  const auto all = s->get_range("r", 0, 3, "", 5000ms);
  t.join();
  ASSERT_EQ(all.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(to_string(*all[static_cast<std::size_t>(i)]), std::to_string(i * 10));
  // Stopped: the missing ones come back empty.
  w->set("stop", to_bytes("1"));
  const auto some = s->get_range("r", 2, 3, "stop", 5000ms);
  ASSERT_EQ(some.size(), 3u);
  EXPECT_TRUE(some[0].has_value());
  EXPECT_FALSE(some[1].has_value());
  EXPECT_THROW(s->get_range("r", 5, 2, "", 100ms), TimeoutError);
  // More keys than etcd takes in one transaction (128).
  for (int i = 0; i < 150; ++i) w->set(fmt::format("big/{}", i), to_bytes("v"));
  EXPECT_EQ(s->get_range("big", 0, 150, "", 5000ms).size(), 150u);
}

TEST_F(EtcdStoreTest, TwoJobsNeverSeeEachOthersKeys) {
  auto one = client(5000ms, "job-one");
  auto two = client(200ms, "job-two");
  one->set("k", to_bytes("one's"));
  EXPECT_FALSE(two->check({"k"}));
  EXPECT_THROW(two->get("k"), TimeoutError);
  EXPECT_EQ(two->num_keys(), 0);
  EXPECT_FALSE(two->remove("k"));
  EXPECT_EQ(to_string(one->get("k")), "one's");
  EXPECT_THROW(client(1000ms, "a/b"), ConfigError);  // an id cannot reach into another's keys
}

// The agreements init runs (publish, count, fail together) work on etcd as
// they do on the TCP store: nothing above the interface knows which it is.
TEST_F(EtcdStoreTest, InitsAgreementsRunOnItUnchanged) {
  std::vector<std::string> errors(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r) {
    ts.emplace_back([&, r] {
      try {
        auto s = client();
        agree_together(*s, "checkin", r, 3, Deadline(10000ms), "join the group", [] {});
        agree_together(*s, "mapped", r, 3, Deadline(10000ms), "map its memory", [&] {
          if (r == 1) throw ConfigError("no /dev/shm");
        });
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors[1], "no /dev/shm");
  EXPECT_EQ(errors[0], "rank 1 could not map its memory, so rank 0 stops too: no /dev/shm");
  EXPECT_EQ(errors[2], "rank 1 could not map its memory, so rank 2 stops too: no /dev/shm");
}

TEST_F(EtcdStoreTest, AWrongEndpointIsAClearErrorWithinItsBound) {
  EtcdStoreOptions o;
  o.endpoints = {fmt::format("127.0.0.1:{}", test::free_port()), etcd_->endpoint()};
  o.job_id = "fallback";
  EtcdStore works(o);  // the second endpoint answers
  works.set("k", to_bytes("v"));
  o.endpoints = {fmt::format("127.0.0.1:{}", test::free_port())};
  o.request_timeout = 1000ms;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    EtcdStore none(o);
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("could not be reached: tried 127.0.0.1:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--rdzv_endpoint"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  o.endpoints = {"node1:notaport"};
  EXPECT_THROW(EtcdStore bad(o), ConfigError);
}

// etcd lost while a rank waits on it: an error naming the endpoint once no
// member answers, not a wait that spins on refused connections until its
// deadline.
TEST_F(EtcdStoreTest, TheStoreLostDuringAWaitIsAnErrorSoon) {
  EtcdProcess own(find_etcd());
  EtcdStoreOptions o;
  o.endpoints = {own.endpoint()};
  o.job_id = "lost";
  o.request_timeout = 1000ms;
  std::unique_ptr<EtcdStore> s;
  const Deadline up(20000ms);
  while (!s && !up.expired()) {
    try {
      s = std::make_unique<EtcdStore>(o);
    } catch (const Error&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  ASSERT_TRUE(s) << "a second etcd did not start";
  std::string error;
  std::chrono::steady_clock::time_point failed;
  std::thread waits([&] {
    try {
      s->get("never", 60000ms);
    } catch (const std::exception& e) {
      error = e.what();
      failed = std::chrono::steady_clock::now();
    }
  });
  std::this_thread::sleep_for(200ms);  // in its watch
  const auto killed = std::chrono::steady_clock::now();
  own.stop(SIGKILL);
  waits.join();
  EXPECT_NE(error.find("could not be reached"), std::string::npos) << error;
  EXPECT_NE(error.find(own.endpoint()), std::string::npos) << error;
  EXPECT_LT(failed - killed, 10s);
}

}  // namespace
}  // namespace mci
