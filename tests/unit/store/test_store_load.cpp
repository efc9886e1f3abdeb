// The store holds the crowd: thousands of clients at once, each answered,
// none dropped; a stranger's flood does not starve the job's clients.
// (Latency percentiles are the benchmark's business: bench/store_load.)
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <future>
#include <thread>

#include "mci/store.hpp"
#include "store_load.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

// Both ends of every connection live in this process: raise our own soft
// descriptor limit for it, or say why the test cannot run.
bool room_for_descriptors(rlim_t need, std::string& why) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur >= need) return true;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
    why = "the descriptor hard limit " + std::to_string(rl.rlim_max) + " is below the " + std::to_string(need) +
          " this test needs (raise it with ulimit -Hn as root)";
    return false;
  }
  rl.rlim_cur = need;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    why = "could not raise the descriptor soft limit to " + std::to_string(need);
    return false;
  }
  return true;
}

TEST(StoreLoad, FourThousandClientsSetGetAddAndWaitAndEveryOneIsAnswered) {
  std::string why;
  if (!room_for_descriptors(2 * 4096 + 256, why)) GTEST_SKIP() << why;
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "job-token"});
  test::StoreLoadOptions o;
  o.port = server.port();
  o.token = "job-token";
  o.clients = 4096;
  o.limit = 240s;
  const auto r = test::run_store_load(o);
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  EXPECT_EQ(r.finished, 4096);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.unfinished, 0);
  EXPECT_EQ(server.rejected_connections(), 0u) << "the store dropped a client";
  // Every add was counted once, and every set is there.
  TcpStoreOptions co;
  co.port = server.port();
  co.token = "job-token";
  TcpStore check(co);
  EXPECT_EQ(check.add("load/count/0", 0), 4096);
  const auto values = check.get_range("load/0", 0, 4096, "", 1000ms);
  ASSERT_EQ(values.size(), 4096u);
  for (int i = 0; i < 4096; ++i) {
    ASSERT_TRUE(values[static_cast<std::size_t>(i)].has_value()) << i;
    ASSERT_EQ(to_string(*values[static_cast<std::size_t>(i)]), "v" + std::to_string(i) + ".0");
  }
}

TEST(StoreLoad, AStrangersFloodDoesNotStarveTheJobsClients) {
  std::string why;
  if (!room_for_descriptors(2 * (256 + 4000) + 256, why)) GTEST_SKIP() << why;
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "job-token"});
  test::StoreLoadOptions o;
  o.port = server.port();
  o.token = "job-token";
  o.clients = 256;
  o.threads = 2;
  o.rounds = 20;
  o.limit = 240s;
  // The job's clients and the flood start together and overlap.
  auto flood = std::async(std::launch::async, [&] { return test::stranger_flood("127.0.0.1", server.port(), 3s); });
  const auto r = test::run_store_load(o);
  const int opened = flood.get();
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  EXPECT_EQ(r.finished, 256);
  EXPECT_EQ(r.failed, 0);
  EXPECT_GT(opened, 0);
  // The flood reached the store and was refused (how much of it, by the
  // time it stops, depends on scheduling).
  EXPECT_GT(server.rejected_connections(), 0u);
}

}  // namespace
}  // namespace mci
