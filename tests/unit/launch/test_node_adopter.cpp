// NodeAdopter over a real store: a node whose presence connection closed
// before it said "done" is claimed by one surviving node, with room for its
// ranks; a node that finished never is.
#include <gtest/gtest.h>

#include <poll.h>

#include <chrono>
#include <memory>

#include "launch/nodes/node_adopter.hpp"
#include "launch/nodes/node_link.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"

namespace mci::launch {
namespace {

using namespace std::chrono_literals;

struct Job {
  StoreServer server{StoreServerOptions{"127.0.0.1", 0, ""}};
  StoreAddress address() const {
    StoreAddress a;
    a.port = server.port();
    return a;
  }
  // Node n's presence: a connection counted until it closes.
  std::unique_ptr<TcpStore> present(int n) const {
    auto c = address().connect(5000ms);
    count_connection(*c, keys::present(n), keys::present_gone(n));
    return c;
  }
  NodeAdopterOptions options(int node_rank) const {
    return NodeAdopterOptions{address(), 3, node_rank, 0, {2, 2, 2}, 5ms};
  }
};

// The nodes `a` claims within `limit` (its fd is readable once it has).
std::vector<int> claims(NodeAdopter& a, std::chrono::milliseconds limit) {
  pollfd p{a.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) != 1) return {};
  return a.take();
}

TEST(NodeAdopter, ALostNodeIsClaimedOnceAndAFinishedOneNever) {
  Job job;
  auto n1 = job.present(1);
  auto n2 = job.present(2);
  NodeAdopter a(job.options(0));
  a.set_room(2);
  // Node 1 finished ("done" before its presence closes), then node 2 is lost.
  auto s = job.address().connect(5000ms);
  s->set(attempt_key(0, "done/1"), to_bytes("1"));
  n1.reset();
  n2.reset();
  EXPECT_EQ(claims(a, 10000ms), std::vector<int>{2});
  // Claimed once, in the store, by node 0; node 1 was looked at in the same
  // round (before node 2) and never claimed.
  EXPECT_EQ(to_string(s->get(attempt_key(0, "adopt/2"), 1000ms)), "0");
  EXPECT_FALSE(s->check({attempt_key(0, "adopt/1")}));
}

TEST(NodeAdopter, ANodeWithoutRoomForTheRanksLeavesThemToAnother) {
  Job job;
  auto n2 = job.present(2);
  NodeAdopter full(job.options(0));
  full.set_room(1);  // node 2 runs 2 ranks
  NodeAdopter roomy(job.options(1));
  roomy.set_room(2);
  n2.reset();
  EXPECT_EQ(claims(roomy, 10000ms), std::vector<int>{2});
  EXPECT_TRUE(full.take().empty());
}

TEST(NodeAdopter, ARefusingNodeClaimsNothing) {
  Job job;
  auto n2 = job.present(2);
  NodeAdopter stopping(job.options(0));
  stopping.set_room(4);
  stopping.refuse();
  NodeAdopter other(job.options(1));
  other.set_room(4);
  n2.reset();
  EXPECT_EQ(claims(other, 10000ms), std::vector<int>{2});
  EXPECT_TRUE(stopping.take().empty());
}

}  // namespace
}  // namespace mci::launch
