// The job's store on a real etcd (Debian's etcd-server, v3 API), beyond the
// Store contract both stores hold (StoreContract.*, test_store.cpp): values
// and edges, one job's keys apart from another's, init's agreements
// (agree(), store/all_ranks.hpp) run on it unchanged, a wrong endpoint and a
// lost etcd as clear errors. Skipped where etcd is not installed.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"
#include "store/etcd_store.hpp"
#include "support/etcd_process.hpp"
#include "support/ports.hpp"
#include "support/temp_dir.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

using test::EtcdProcess;
using test::find_etcd;

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { MCI_NEEDS_SHARED_ETCD(); }

  // A client of this test's own job (its keys apart from every other test's).
  std::shared_ptr<EtcdStore> client(std::chrono::milliseconds t = 5000ms, std::string job = "") {
    EtcdStoreOptions o;
    o.endpoints = {test::shared_etcd()->endpoint()};
    o.job_id = job.empty() ? ::testing::UnitTest::GetInstance()->current_test_info()->name() : job;
    o.timeout = t;
    return std::make_shared<EtcdStore>(o);
  }
  static std::string endpoint() { return test::shared_etcd()->endpoint(); }
  // A client of a test's own etcd, once it answers.
  static std::unique_ptr<EtcdStore> own_client(const EtcdProcess& own, const std::string& job,
                                               std::chrono::milliseconds request_timeout, std::string* why) {
    EtcdStoreOptions o;
    o.endpoints = {own.endpoint()};
    o.job_id = job;
    o.request_timeout = request_timeout;
    return test::etcd_client_when_up(o, why);
  }
};

TEST_F(EtcdStoreTest, ValuesAndEdges) {
  auto s = client();
  const StoreValue binary = {0, 255, 10, 13, 0, 61};  // any byte, through base64
  s->set("bin", binary);
  EXPECT_EQ(s->get("bin"), binary);
  s->set("empty", to_bytes(""));
  EXPECT_TRUE(s->check({"empty"}));  // an empty value exists (the gateway leaves it out of its answer)
  EXPECT_EQ(s->compare_set("missing", to_bytes("a"), to_bytes("b")).size(), 0u);
  EXPECT_FALSE(s->check({"missing"}));
  EXPECT_EQ(s->append("nothing", {}).size(), 0u);
  EXPECT_FALSE(s->check({"nothing"}));  // reading does not create it
  s->set("text", to_bytes("abc"));
  EXPECT_THROW(s->add("text", 1), Error);
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
  o.endpoints = {fmt::format("127.0.0.1:{}", test::free_port()), endpoint()};
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
  std::string why;
  const std::unique_ptr<EtcdStore> s = own_client(own, "lost", 1000ms, &why);
  ASSERT_TRUE(s) << "a second etcd did not start: " << why;
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

// A short wait while etcd answers nothing (a leader's election, a member
// stopped) ends as that wait's timeout soon after its deadline, not as an
// error after a request's whole budget: a relay's client gives up on the
// answer about a second after its deadline, and a lazy connection's address
// lookup asks for 1 ms and asks again later (the fault matrix once saw a
// job fail when one etcd member was killed).
TEST_F(EtcdStoreTest, AShortWaitIsATimeoutWhenEtcdDoesNotAnswer) {
  EtcdProcess own(find_etcd());
  std::string why;
  const std::unique_ptr<EtcdStore> s = own_client(own, "silent", 30000ms, &why);
  ASSERT_TRUE(s) << "a second etcd did not start: " << why;
  s->set("there", to_bytes("v"));
  own.signal(SIGSTOP);
  const std::vector<std::function<void()>> waits = {
      [&] { s->get("there", 1ms); },
      [&] { s->wait({"there"}, 1ms); },
      [&] { s->get_range("r", 0, 2, "", 1ms); },
  };
  for (const auto& wait : waits) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      wait();
      ADD_FAILURE() << "a read answered by a stopped etcd";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("etcd did not answer in time"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a timeout: " << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s) << "the request's budget (30 s), not the wait's";
  }
  own.signal(SIGCONT);
  EXPECT_EQ(s->get("there", 10000ms), to_bytes("v")) << "asked again, it is answered";
}

// etcd over TLS with client certificates (a CA the test makes): a client
// with the CA and its certificate works; one without its certificate, one
// that trusts another CA, and one speaking plain http each fail with what to
// do, within their budget; mismatched options are refused before any
// request.
TEST_F(EtcdStoreTest, OverTlsWithClientCertificates) {
  const test::TempDir dir;
  const test::TestCerts certs = test::make_test_certs(dir.path());
  if (!certs.error.empty()) GTEST_SKIP() << certs.error << " (the openssl command is needed)";
  EtcdProcess own(find_etcd(), &certs);
  EtcdStoreOptions o;
  o.endpoints = {own.endpoint()};
  o.job_id = "tls";
  o.https = true;
  o.cacert = certs.ca;
  o.cert = certs.client_cert;
  o.key = certs.client_key;
  o.request_timeout = 1000ms;
  std::string why;
  const std::unique_ptr<EtcdStore> s = test::etcd_client_when_up(o, &why);
  ASSERT_TRUE(s) << "no TLS connection to a TLS etcd: " << why;
  s->set("k", to_bytes("over tls"));
  EXPECT_EQ(s->get("k", 5000ms), to_bytes("over tls"));
  EXPECT_EQ(s->add("n", 2), 2);

  const auto error_of = [](const EtcdStoreOptions& bad) -> std::string {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      EtcdStore refused(bad);
      return "(it worked)";
    } catch (const std::exception& e) {
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << e.what();
      return e.what();
    }
  };
  EtcdStoreOptions no_cert = o;
  no_cert.cert.clear();
  no_cert.key.clear();
  const std::string no_cert_error = error_of(no_cert);
  EXPECT_NE(no_cert_error.find("could not be reached"), std::string::npos) << no_cert_error;
  EXPECT_NE(no_cert_error.find("--rdzv_conf cert=FILE,key=FILE"), std::string::npos) << no_cert_error;
  EtcdStoreOptions stranger = o;
  stranger.cacert = certs.stranger_ca;
  const std::string not_trusted = error_of(stranger);
  // OpenSSL may end the handshake itself or let httplib check the certificate: either names the CA option.
  EXPECT_NE(not_trusted.find("signed by the CA given (--rdzv_conf cacert=FILE)"), std::string::npos) << not_trusted;
  EtcdStoreOptions plain = o;
  plain.https = false;
  plain.cacert.clear();
  plain.cert.clear();
  plain.key.clear();
  EXPECT_NE(error_of(plain).find("could not be reached"), std::string::npos) << error_of(plain);

  EtcdStoreOptions half = o;
  half.key.clear();
  EXPECT_NE(error_of(half).find("a client certificate needs its key"), std::string::npos);
  EtcdStoreOptions missing = o;
  missing.cacert = dir.path() + "/none.pem";
  EXPECT_NE(error_of(missing).find("cannot read"), std::string::npos);
  EtcdStoreOptions mixed = o;
  mixed.endpoints = {"https://" + own.endpoint(), "http://127.0.0.1:1"};
  EXPECT_NE(error_of(mixed).find("mix http:// and https://"), std::string::npos);
  EtcdStoreOptions by_url = o;
  by_url.https = false;
  by_url.endpoints = {"https://" + own.endpoint()};
  EXPECT_NO_THROW(EtcdStore{by_url}) << "an https:// endpoint asks for TLS";
}

}  // namespace
}  // namespace mci
