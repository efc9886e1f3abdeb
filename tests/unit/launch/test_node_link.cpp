#include <gtest/gtest.h>

#include <signal.h>

#include "launch/node_link.hpp"

namespace mci::launch {
namespace {

using Kind = NodeLink::EventKind;

TEST(NodeLink, NewsOfAFailureOrAStopIsReadBackAsPublished) {
  auto failed = NodeLink::parse_news("1|rank 3 (pid 9 on b) failed: exit code 1", 0);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, Kind::peer_failed);
  EXPECT_EQ(failed->text, "node 1: rank 3 (pid 9 on b) failed: exit code 1");

  auto stopped = NodeLink::parse_news("0|signal 2|host a", 1);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->kind, Kind::peer_stopped);
  EXPECT_EQ(stopped->signal, SIGINT);
  EXPECT_EQ(stopped->text, "node 0 (host a)");

  EXPECT_FALSE(NodeLink::parse_news("1|signal 15|host b", 1)) << "a node's own news is not news to it";
  EXPECT_FALSE(NodeLink::parse_news("1|rank 2 failed", 1));

  // A failure whose text starts like a stop, but is not one, stays a failure.
  auto odd = NodeLink::parse_news("1|signal handler crashed", 0);
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->kind, Kind::peer_failed);
}

}  // namespace
}  // namespace mci::launch
