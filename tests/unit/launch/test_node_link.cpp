#include <gtest/gtest.h>

#include <signal.h>

#include "launch/nodes/node_link.hpp"
#include "store/records.hpp"

namespace mci::launch {
namespace {

using Kind = NodeLink::EventKind;

std::string news(int node, int signal, const std::string& text) {
  return records::encode_node_news({node, signal, text});
}

TEST(NodeLink, NewsOfAFailureOrAStopIsReadBackAsPublished) {
  auto failed = NodeLink::parse_news(news(1, 0, "rank 3 (pid 9 on b) failed: exit code 1"), 0);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, Kind::peer_failed);
  EXPECT_EQ(failed->text, "node 1: rank 3 (pid 9 on b) failed: exit code 1");

  auto stopped = NodeLink::parse_news(news(0, SIGINT, "host a"), 1);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->kind, Kind::peer_stopped);
  EXPECT_EQ(stopped->signal, SIGINT);
  EXPECT_EQ(stopped->text, "node 0 (host a)");

  EXPECT_FALSE(NodeLink::parse_news(news(1, SIGTERM, "host b"), 1)) << "a node's own news is not news to it";
  EXPECT_FALSE(NodeLink::parse_news(news(1, 0, "rank 2 failed"), 1));

  // A failure whose text looks like a stop, or holds the old separators,
  // stays a failure with its text whole.
  auto odd = NodeLink::parse_news(news(1, 0, "signal 9|handler crashed on a|b"), 0);
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->kind, Kind::peer_failed);
  EXPECT_EQ(odd->text, "node 1: signal 9|handler crashed on a|b");

  // A value that is no record (another program's) is said as it is.
  auto foreign = NodeLink::parse_news("1|rank 2 failed", 0);
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->kind, Kind::peer_failed);
  EXPECT_EQ(foreign->text, "1|rank 2 failed");
}

}  // namespace
}  // namespace mci::launch
