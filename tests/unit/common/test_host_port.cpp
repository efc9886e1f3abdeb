// "HOST:PORT" split once for every part that reads one (common/host_port.hpp).
#include <gtest/gtest.h>

#include "common/host_port.hpp"

namespace mci {
namespace {

HostPort ok(const std::string& text) {
  std::string why;
  const auto hp = split_host_port(text, why);
  EXPECT_TRUE(hp.has_value()) << text << ": " << why;
  return hp.value_or(HostPort{});
}

std::string why_not(const std::string& text) {
  std::string why;
  EXPECT_FALSE(split_host_port(text, why).has_value()) << text;
  return why;
}

TEST(HostPort, SplitsEveryFormAndWritesItBack) {
  EXPECT_EQ(ok("node1:2379").host, "node1");
  EXPECT_EQ(ok("node1:2379").port, 2379);
  EXPECT_EQ(ok("node1").port, 0);  // none given: the caller's default
  EXPECT_EQ(ok("[::1]:80").host, "::1");
  EXPECT_EQ(ok("[::1]:80").port, 80);
  EXPECT_EQ(ok("[fe80::1]").host, "fe80::1");
  EXPECT_EQ(ok("[fe80::1]").port, 0);
  // What text() writes is read back the same.
  for (const HostPort& hp : {HostPort{"10.0.0.5", 29400}, HostPort{"::1", 2379}}) {
    const HostPort back = ok(hp.text());
    EXPECT_EQ(back.host, hp.host);
    EXPECT_EQ(back.port, hp.port);
  }
  EXPECT_EQ((HostPort{"::1", 2379}.text()), "[::1]:2379");
}

TEST(HostPort, SaysWhatIsWrong) {
  EXPECT_NE(why_not("::1:80").find("IPv6 address in brackets"), std::string::npos);
  EXPECT_NE(why_not("[::1").find("missing ']'"), std::string::npos);
  EXPECT_NE(why_not("[::1]80").find("expected ':PORT' after ']'"), std::string::npos);
  EXPECT_NE(why_not(":80").find("no host"), std::string::npos);
  for (const char* bad : {"h:", "h:0", "h:65536", "h:80x", "h:-1"}) {
    EXPECT_NE(why_not(bad).find("is not a TCP port: use a number from 1 to 65535"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace mci
