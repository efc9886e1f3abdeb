#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "mci/errors.hpp"
#include "mci/store.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

TEST(StoreAddress, MakesAClientWithTheTokenAndTheTimeoutsItIsGiven) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "secret-token"});
  const StoreAddress at{"127.0.0.1", server.port(), "secret-token"};
  const TcpStoreOptions o = at.options(250ms, 2s);
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, server.port());
  EXPECT_EQ(o.token, "secret-token");
  EXPECT_EQ(o.timeout, 250ms);
  EXPECT_EQ(o.connect_timeout, 2s);
  EXPECT_EQ(at.options(1s).connect_timeout, TcpStoreOptions{}.connect_timeout);

  const auto client = at.connect(250ms, 2s);
  client->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(client->get("k")), "v");
  try {
    client->get("missing");
    FAIL() << "a key nobody sets must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("Timed out waiting 250ms"), std::string::npos) << e.what();
  }
  // The token is the address's: another one is refused.
  EXPECT_THROW(StoreAddress({"127.0.0.1", server.port(), "wrong"}).connect(250ms, 1s), ConfigError);
}

}  // namespace
}  // namespace mci
