// The program's MASTER_ADDR/MASTER_PORT through the job's store: a node
// reads what the publishing node wrote, under the attempt's scope; and a
// node waiting on a publisher that is gone stops at once with why, rather
// than wait --rdzv_conf join_timeout (an elastic attempt's GROUP_RANK 0
// lost before it said where rank 0 listens).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "launch/nodes/program_port.hpp"

namespace mci::launch {
namespace {

using namespace std::chrono_literals;

struct Store {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
  ProgramPortOptions options(const std::string& scope) const {
    ProgramPortOptions o;
    o.store.port = server.port();
    o.wait_limit = 30s;
    o.scope = scope;
    return o;
  }
};

TEST(ProgramPort, ANodeReadsTheEndpointPublishedUnderItsScope) {
  Store s;
  publish_program_endpoint(s.options("/attempt/3"), ProgramEndpoint{"10.0.0.7", 4242, "stop"});
  SignalFd signals;
  int sig = 0;
  const auto e = fetch_program_endpoint(s.options("/attempt/3"), signals, &sig);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->addr, "10.0.0.7");
  EXPECT_EQ(e->port, 4242);
  // Another attempt's scope holds nothing yet: a publisher that is gone
  // ends the wait.
  ProgramPortOptions other = s.options("/attempt/4");
  int asked = 0;
  other.owner_gone = [&]() -> std::optional<std::string> {
    return ++asked >= 2 ? std::optional<std::string>("its mcirun left the job") : std::nullopt;
  };
  other.wait_limit = std::chrono::hours(1);  // only the publisher's loss can end this wait
  try {
    (void)fetch_program_endpoint(other, signals, &sig);
    ADD_FAILURE() << "no ProgramOwnerLost";
  } catch (const ProgramOwnerLost& e) {
    EXPECT_STREQ(e.what(), "its mcirun left the job");
  }
  EXPECT_EQ(asked, 2) << "asked at each try, and stopped at the first answer";
}

}  // namespace
}  // namespace mci::launch
