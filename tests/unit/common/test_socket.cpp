#include <gtest/gtest.h>

#include <net/if.h>

#include "common/socket.hpp"

namespace mci {
namespace {

TEST(Socket, InterfaceTowardLoopbackIsTheLoopbackInterface) {
  const std::string lo = interface_toward("127.0.0.1");
  ASSERT_FALSE(lo.empty());
  EXPECT_NE(::if_nametoindex(lo.c_str()), 0u) << lo << " is an interface of this host";
  EXPECT_EQ(interface_toward("localhost"), lo);
}

TEST(Socket, InterfaceTowardNowhereIsEmpty) {
  EXPECT_EQ(interface_toward("no-such-host.invalid"), "");
}

}  // namespace
}  // namespace mci
