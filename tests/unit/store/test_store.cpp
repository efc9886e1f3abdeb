#include <gtest/gtest.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "support/etcd_process.hpp"
#ifdef MCI_HAVE_ETCD
#include "store/store_relay.hpp"
#endif

namespace mci {
namespace {

using namespace std::chrono_literals;

struct StoreTest : ::testing::Test {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
  std::shared_ptr<TcpStore> client(std::chrono::milliseconds t = 5000ms, std::string token = "") {
    TcpStoreOptions o;
    o.port = server.port();
    o.timeout = t;
    o.connect_timeout = 5000ms;
    o.token = std::move(token);
    return std::make_shared<TcpStore>(o);
  }
};

// The Store contract, held by every implementation behind the interface:
// mci's TCP store and, where it is built and etcd is installed, the store
// on etcd (a real etcd the binary starts once; each test its own job, so
// its keys start empty).
struct StoreContract : ::testing::TestWithParam<std::string> {
  void SetUp() override {
    if (GetParam() == "tcp") return;
#ifdef MCI_HAVE_ETCD
    MCI_NEEDS_SHARED_ETCD();
    // A node's relay in front of etcd, reached with mci's own client.
    if (GetParam() == "relay")
      relay = std::make_unique<StoreRelay>(StoreRelayOptions{"127.0.0.1", 0, "", etcd(5000ms)});
#else
    GTEST_SKIP() << "this build has no store on etcd (cpp-httplib was not found)";
#endif
  }
#ifdef MCI_HAVE_ETCD
  static EtcdStoreOptions etcd(std::chrono::milliseconds t) {
    EtcdStoreOptions e;
    e.endpoints = {test::shared_etcd()->endpoint()};
    e.job_id = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(e.job_id.begin(), e.job_id.end(), '/', '-');
    e.timeout = t;
    return e;
  }
#endif
  std::shared_ptr<Store> client(std::chrono::milliseconds t = 5000ms) {
    int port = server.port();
#ifdef MCI_HAVE_ETCD
    if (GetParam() == "etcd") return std::make_shared<EtcdStore>(etcd(t));
    if (relay) port = relay->port();
#endif
    TcpStoreOptions o;
    o.port = port;
    o.timeout = t;
    o.connect_timeout = 5000ms;
    return std::make_shared<TcpStore>(o);
  }
  // How many operations a test of many makes: etcd commits each one through
  // its log (about 1 ms here), mci's store in microseconds.
  int scaled(int tcp) const { return GetParam() == "tcp" ? tcp : std::max(1, tcp / 8); }
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
#ifdef MCI_HAVE_ETCD
  std::unique_ptr<StoreRelay> relay;
#endif
};

TEST_P(StoreContract, SetGetRemoveAndCount) {
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
  EXPECT_EQ(s->get("b").size(), 0u);
}

TEST_P(StoreContract, GetWaitsForAKeySetByAnotherClient) {
  auto reader = client();
  auto writer = client();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    writer->set("late", to_bytes("here"));
  });
  EXPECT_EQ(to_string(reader->get("late")), "here");
  t.join();
}

TEST_P(StoreContract, GetAndWaitTimeOutWithTheKeyNamed) {
  auto s = client(200ms);
  try {
    s->get("never");
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("Timed out waiting 200ms for store key 'never'"), std::string::npos)
        << e.what();
  }
  try {
    s->wait({"x", "y"}, 100ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'x', 'y'"), std::string::npos) << e.what();
  }
  // The connection is still usable after a server-side timeout.
  s->set("x", to_bytes("1"));
  s->set("y", to_bytes("1"));
  s->wait({"x", "y"}, 100ms);
}

// A wait whose deadline has already passed asks for a negative time: the
// server used to drop the connection as malformed, and the client's every
// later call failed (a shrink under a cut link lost its store that way).
TEST_P(StoreContract, AWaitOfANegativeTimeIsAnAnswerAtOnceAndTheConnectionStays) {
  auto s = client();
  EXPECT_THROW(s->get("never", -5ms), TimeoutError);
  EXPECT_THROW(s->wait({"never"}, -5ms), TimeoutError);
  EXPECT_THROW(s->get_range("r", 0, 2, "", -5ms), TimeoutError);
  s->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(s->get("k", -5ms)), "v");
}

TEST_P(StoreContract, ConcurrentAddsFromManyClientsAreAtomic) {
  const int kClients = 8, kAdds = scaled(300);
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
}

TEST_P(StoreContract, CompareSetOnlyReplacesTheExpectedValue) {
  auto s = client();
  EXPECT_EQ(to_string(s->compare_set("k", {}, to_bytes("first"))), "first");
  EXPECT_EQ(to_string(s->compare_set("k", {}, to_bytes("second"))), "first");
  EXPECT_EQ(to_string(s->compare_set("k", to_bytes("first"), to_bytes("third"))), "third");
  EXPECT_EQ(to_string(s->compare_set("k", to_bytes("nope"), to_bytes("x"))), "third");
}

TEST_P(StoreContract, AppendGrowsTheValueAtomicallyAndAnswersIt) {
  auto a = client();
  auto b = client();
  EXPECT_EQ(to_string(a->append("list", to_bytes("1;"))), "1;");
  EXPECT_EQ(to_string(b->append("list", to_bytes("2;"))), "1;2;");
  EXPECT_EQ(to_string(a->append("list", {})), "1;2;");  // reads it in one request
  // Through a prefix, and the base class's compare_set loop gives the same.
  PrefixStore p("job", a);
  EXPECT_EQ(to_string(p.append("x", to_bytes("a"))), "a");
  EXPECT_EQ(to_string(b->get("job/x")), "a");
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      auto c = client();
      for (int j = 0; j < scaled(50); ++j) c->append("many", to_bytes(std::to_string(i)));
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(a->get("many").size(), static_cast<std::size_t>(4 * scaled(50)));
}

TEST_F(StoreTest, AppendOnCloseIsWrittenWhenTheConnectionEndsAndWakesAWaiter) {
  auto watcher = client();
  auto dying = client();
  ASSERT_TRUE(dying->append_on_close("gone", to_bytes("3;")));
  ASSERT_TRUE(dying->append_on_close("gone", to_bytes("3b;")));
  EXPECT_FALSE(watcher->check({"gone"}));  // nothing while it lives
  std::thread waits([&] { EXPECT_EQ(to_string(watcher->get("gone", 5000ms)), "3;3b;"); });
  dying.reset();  // its connection closes: the server writes both
  waits.join();
}

TEST_P(StoreContract, WaitReturnsOnceEveryKeyExists) {
  auto s = client();
  auto w = client();
  std::atomic<bool> done{false};
  std::thread t([&] {
    s->wait({"k1", "k2"}, 5000ms);
    done = true;
  });
  w->set("k1", to_bytes("1"));
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(done.load());
  w->set("k2", to_bytes("1"));
  t.join();
  EXPECT_TRUE(done.load());
}

TEST_F(StoreTest, MalformedFramesCloseOnlyThatConnection) {
  auto good = client();
  good->set("keep", to_bytes("v"));
  for (const std::string& junk :
       {std::string("GET / HTTP/1.1\r\n\r\n"), std::string(64, '\xff'), std::string("MCIS\xff\xff\xff\x7f", 8)}) {
    Fd fd = connect_tcp("127.0.0.1", server.port(), Deadline(2000ms), "store");
    ASSERT_EQ(send_all(fd.get(), junk.data(), junk.size(), Deadline(2000ms)), Io::ok);
    char buf[256];
    // The server greets, then drops us: read until EOF.
    Io io = Io::ok;
    while (io == Io::ok) io = recv_all(fd.get(), buf, 1, Deadline(3000ms));
    EXPECT_EQ(io, Io::closed);
  }
  EXPECT_EQ(to_string(good->get("keep")), "v");
  EXPECT_GE(server.rejected_connections(), 3u);
}

TEST_P(StoreContract, ClientThatDisconnectsWhileWaitingDoesNotDisturbOthers) {
  {
    auto leaver = client();
    std::thread t([&] {
      try {
        leaver->get("never", 300ms);
      } catch (const TimeoutError&) {
      }
    });
    t.join();
  }
  auto s = client();
  s->set("after", to_bytes("ok"));
  EXPECT_EQ(to_string(s->get("after")), "ok");
}

TEST(StoreAuth, TokenIsRequiredAndCheckedBothWays) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "secret-token"});
  TcpStoreOptions o;
  o.port = server.port();
  o.connect_timeout = 3000ms;
  o.token = "secret-token";
  TcpStore good(o);
  good.set("x", to_bytes("1"));

  o.token = "";
  EXPECT_THROW({ TcpStore none(o); }, ConfigError);
  o.token = "wrong";
  try {
    TcpStore wrong(o);
    wrong.set("y", to_bytes("1"));
    FAIL() << "a wrong token was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("token"), std::string::npos);
  }
  EXPECT_EQ(to_string(good.get("x")), "1");

  // A client with a token refuses a store that cannot prove it.
  StoreServer open(StoreServerOptions{"127.0.0.1", 0, ""});
  o.port = open.port();
  o.token = "secret-token";
  EXPECT_THROW({ TcpStore c(o); }, ConfigError);
}

// The refused process's peers wait for its keys in vain: their timeout says
// the store refused someone, and how to fix it.
TEST(StoreAuth, PeersOfARefusedProcessLearnItWhenTheyTimeOut) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "secret-token"});
  TcpStoreOptions o;
  o.port = server.port();
  o.connect_timeout = 3000ms;
  o.token = "secret-token";
  TcpStore good(o);
  try {
    good.get("rank/1", 200ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()).find("refused"), std::string::npos) << "nobody was refused yet: " << e.what();
  }
  o.token = "another-token";
  EXPECT_THROW({ TcpStore wrong(o); }, ConfigError);
  o.token = "";
  EXPECT_THROW({ TcpStore none(o); }, ConfigError);
  try {
    good.get("rank/1", 200ms);
    FAIL();
  } catch (const TimeoutError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Timed out waiting 200ms for store key 'rank/1'"), std::string::npos) << m;
    EXPECT_NE(m.find("The store refused 2 process(es) that connected without a job token, the last from 127.0.0.1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("give every rank the same token"), std::string::npos) << m;
  }
}

TEST(StoreConnect, UnreachableStoreTimesOutWithAClearMessage) {
  int port;
  {
    Fd l = listen_tcp("127.0.0.1", 0);
    port = local_port(l.get());
  }
  TcpStoreOptions o;
  o.port = port;
  o.connect_timeout = 300ms;
  try {
    TcpStore s(o);
    FAIL();
  } catch (const TimeoutError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Timed out waiting 300ms to connect to the store at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << m;
  }
}

TEST(StoreServerBind, PortInUseIsAClearError) {
  StoreServer a(StoreServerOptions{"127.0.0.1", 0, ""});
  try {
    StoreServer b(StoreServerOptions{"127.0.0.1", a.port(), ""});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContract, ::testing::Values("tcp", "etcd", "relay"),
                         [](const auto& info) { return info.param; });

TEST(PrefixStore, NamespacesKeys) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  TcpStoreOptions o;
  o.port = server.port();
  auto base = std::make_shared<TcpStore>(o);
  PrefixStore a("a", base), b("b", base);
  a.set("k", to_bytes("1"));
  b.set("k", to_bytes("2"));
  EXPECT_EQ(to_string(a.get("k")), "1");
  EXPECT_EQ(to_string(base->get("b/k")), "2");
  EXPECT_EQ(a.add("n", 3), 3);
  EXPECT_TRUE(a.check({"k", "n"}));
  EXPECT_FALSE(b.check({"n"}));
}

}  // namespace
}  // namespace mci
