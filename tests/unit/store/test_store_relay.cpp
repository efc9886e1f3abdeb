// A node's relay to the job's store on etcd (store_relay.hpp), beyond the
// Store contract it holds through mci's own client (StoreContract.*/relay):
// its death certificates, written when a client's connection ends (also
// while that client's request still waits on etcd) and, when the relay
// itself dies with its node, by another relay once the dead one's lease
// ends; a relay cut off from etcd stops its clients; the job token. Against
// a real etcd; skipped where etcd is not installed.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/etcd_store.hpp"
#include "store/store_relay.hpp"
#include "support/etcd_process.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

class StoreRelayTest : public ::testing::Test {
 protected:
  void SetUp() override { MCI_NEEDS_SHARED_ETCD(); }
  static EtcdStoreOptions etcd() {
    EtcdStoreOptions o;
    o.endpoints = {test::shared_etcd()->endpoint()};
    o.job_id = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    o.timeout = 20000ms;
    return o;
  }
  static StoreRelayOptions relay_options(const std::string& token = "") {
    StoreRelayOptions o;
    o.token = token;
    o.etcd = etcd();
    o.lease_ttl = 1s;  // etcd raises it to its minimum
    return o;
  }
  static std::unique_ptr<TcpStore> client_of(const StoreRelay& r, const std::string& token = "",
                                             std::chrono::milliseconds connect = 5000ms) {
    TcpStoreOptions o;
    o.port = r.port();
    o.token = token;
    o.timeout = 20000ms;
    o.connect_timeout = connect;
    return std::make_unique<TcpStore>(o);
  }
};

// The relay writes a connection's promises the moment it ends, though its
// handler is still blocked in that connection's wait on etcd (the wait
// would last 60 s).
TEST_F(StoreRelayTest, PromisesAreKeptWhenTheConnectionEndsMidWait) {
  StoreRelay relay(relay_options());
  EtcdStore watcher(etcd());
  auto dying = client_of(relay);
  ASSERT_TRUE(dying->append_on_close("gone", to_bytes("3;")));
  ASSERT_TRUE(dying->append_on_close("gone", to_bytes("3b;")));
  EXPECT_FALSE(watcher.check({"gone"}));  // nothing while it lives
  std::thread waits([&] {
    // The interrupt may come while the set's reply is still on its way
    // (the watcher already saw the key): then the set throws (CI, loaded).
    try {
      dying->set("waiting", to_bytes("1"));
      (void)dying->get("never", 60000ms);
      ADD_FAILURE() << "a get of a key nobody sets returned";
    } catch (const Error&) {
      // the connection closed under it: what the test does
    }
  });
  // Its get comes right after this key (whether it reached the relay yet or
  // not, the promises must be written when the connection closes).
  watcher.get("waiting", 15000ms);
  dying->interrupt();  // its connection closes, the get most likely parked on etcd
  EXPECT_EQ(to_string(watcher.get("gone", 15000ms)), "3;3b;");
  waits.join();
}

// A relay killed with its node cannot write its promises: another relay
// does, once the dead one's lease ends, and only once.
TEST_F(StoreRelayTest, ALostRelaysPromisesAreKeptByAnotherRelay) {
  // Forked before this process has any thread (the relays below start them).
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    try {
      StoreRelay doomed(relay_options());
      auto rank = client_of(doomed);
      rank->append_on_close("gone", to_bytes("A;"));
      char b = 1;
      if (::write(ready[1], &b, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  const bool up = ::poll(&p, 1, 20000) == 1;
  ::close(ready[0]);
  if (!up) ::kill(child, SIGKILL);
  ASSERT_TRUE(up) << "the doomed relay did not start";

  StoreRelay survivor(relay_options());
  EtcdStore watcher(etcd());
  ::kill(child, SIGKILL);  // the relay, its client and its lease's renewals, at once
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_EQ(to_string(watcher.get("gone", 15000ms)), "A;");
  // The survivor counts it once its transaction returns, a moment after the
  // watcher may read what it wrote.
  const Deadline counted(5000ms);
  while (survivor.kept_for_others() == 0 && !counted.expired()) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(survivor.kept_for_others(), 1u);
  // Claimed once: no promise is left for anyone to write again.
  EXPECT_TRUE(watcher.list({"mci/relay/promise/"})[0].empty());
}

// A relay that closes with its clients still connected writes their promises
// itself, then revokes its lease: nothing is left for another relay.
TEST_F(StoreRelayTest, AClosedRelayKeepsItsPromisesAndLeavesNothingBehind) {
  EtcdStore watcher(etcd());
  {
    StoreRelay relay(relay_options());
    auto rank = client_of(relay);
    rank->append_on_close("gone", to_bytes("B;"));
    EXPECT_EQ(watcher.list({"mci/relay/alive/"})[0].size(), 1u);
    rank.reset();
    EXPECT_EQ(to_string(watcher.get("gone", 15000ms)), "B;");
  }
  const auto left = watcher.list({"mci/relay/alive/", "mci/relay/promise/"});
  EXPECT_TRUE(left[0].empty());
  EXPECT_TRUE(left[1].empty());
}

// A relay whose lease ended while it ran (its node cut off from etcd for
// longer than the TTL) has been counted lost: its clients' calls fail at
// once instead of running on beside a group that left them.
TEST_F(StoreRelayTest, ARelayCutOffFromItsLeaseStopsItsClients) {
  StoreRelay cut(relay_options());
  StoreRelay other(relay_options());
  EtcdStore watcher(etcd());
  auto rank = client_of(cut);
  rank->append_on_close("gone", to_bytes("C;"));
  watcher.revoke_lease(cut.lease());  // what etcd does when the renewals stop coming
  try {
    rank->get("never", 20000ms);
    ADD_FAILURE() << "the call went on";
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "waited its whole timeout: " << e.what();
  } catch (const Error&) {
  }
  EXPECT_TRUE(cut.lost());
  EXPECT_EQ(to_string(watcher.get("gone", 15000ms)), "C;");  // kept by the other relay
  EXPECT_THROW(client_of(cut, "", 500ms), Error);            // and no newcomer is served
}

TEST_F(StoreRelayTest, ClientsMustProveTheJobToken) {
  StoreRelay relay(relay_options("tok"));
  auto good = client_of(relay, "tok");
  good->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(good->get("k")), "v");
  EXPECT_THROW(client_of(relay, "other"), Error);
  EXPECT_THROW(client_of(relay, ""), Error);
}

// A short wait through the relay while etcd answers nothing (a leader's
// election; here etcd stopped) ends as the client's timeout within its
// patience, get and get_range alike, and the client's connection still
// serves once etcd answers again: a late answer would have broken it.
TEST_F(StoreRelayTest, AShortWaitWhileEtcdIsSilentIsATimeoutAndTheConnectionLives) {
  test::EtcdProcess own(test::find_etcd());
  EtcdStoreOptions e = etcd();
  e.endpoints = {own.endpoint()};
  e.request_timeout = 5000ms;
  std::string why;
  ASSERT_TRUE(test::etcd_client_when_up(e, &why)) << "a second etcd did not start: " << why;
  StoreRelayOptions ro = relay_options();
  ro.etcd = e;
  // Longer than etcd stays stopped and its renewals wait: etcd, continued,
  // would otherwise find the relay's lease run out and end it (its own clock
  // ran on), which is another test (ARelayCutOffFromItsLeaseStopsItsClients).
  ro.lease_ttl = 20s;
  StoreRelay relay(ro);
  auto c = client_of(relay);
  c->set("there", to_bytes("v"));
  own.signal(SIGSTOP);
  EXPECT_THROW(c->get("missing", 1ms), TimeoutError);
  EXPECT_THROW(c->get_range("r", 0, 2, "", 1ms), TimeoutError);
  own.signal(SIGCONT);
  EXPECT_EQ(to_string(c->get("there", 10000ms)), "v") << "the same connection serves again";
}

// Many clients of one relay, and a second relay beside it, adding to one
// counter and appending to one key at once (an agreement's count at init):
// every add is counted once, each returns a value no other did, and no
// append is lost, whether the relay queued them or etcd's swaps raced.
TEST_F(StoreRelayTest, ConcurrentAddsAndAppendsAreEachCountedOnce) {
  StoreRelay one(relay_options()), two(relay_options());
  constexpr int kClients = 8, kAdds = 10;
  std::vector<std::vector<std::int64_t>> got(2 * kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < 2 * kClients; ++c) {
    threads.emplace_back([&, c] {
      auto s = client_of(c % 2 ? two : one);
      for (int i = 0; i < kAdds; ++i) {
        got[static_cast<std::size_t>(c)].push_back(s->add("count", 1));
        (void)s->append("log", to_bytes("x"));
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::int64_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(all.size());
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected) << "each add returns its own value, from 1 to the number of adds";
  auto check = client_of(one);
  EXPECT_EQ(check->add("count", 0), 2 * kClients * kAdds);
  EXPECT_EQ(check->append("log", {}).size(), static_cast<std::size_t>(2 * kClients * kAdds));
}

}  // namespace
}  // namespace mci

namespace mci {
namespace {

// Every key of a job is under the job's lease, which the relays share and
// renew: node 0's end_job() takes them all at once; a second relay renews
// the lease the first granted, not one of its own.
TEST_F(StoreRelayTest, AJobsKeysGoWhenItEnds) {
  EtcdStore watcher(etcd());
  StoreRelay first(relay_options());
  StoreRelay second(relay_options());
  client_of(first)->set("weights", to_bytes("w"));
  client_of(second)->set("step", to_bytes("7"));
  EXPECT_TRUE(watcher.check({"weights", "step"}));
  first.end_job();
  EXPECT_FALSE(watcher.check({"weights"}));
  EXPECT_FALSE(watcher.check({"step"}));
}

}  // namespace
}  // namespace mci
