// The open-file check mcirun makes before it starts a job.
#include <gtest/gtest.h>

#include "launch/ranks/fd_budget.hpp"

namespace mci::launch {
namespace {

TEST(FdBudget, LazyRanksNeedFewFilesAndEagerOnesOnePerPeer) {
  const FdNeed lazy = fd_need(256, 256, true, false);
  const FdNeed eager = fd_need(256, 256, true, true);
  EXPECT_EQ(lazy.launcher, eager.launcher);
  EXPECT_GE(lazy.launcher, 2u * 256 + 2u * 256);  // two pipes per rank, the store's connections
  EXPECT_LT(lazy.per_rank, 128u);
  EXPECT_GE(eager.per_rank, 255u);
  // Only node 0 hosts the store: the other nodes' mcirun needs its pipes.
  EXPECT_LT(fd_need(32, 256, false, false).launcher, 256u);
}

TEST(FdBudget, EnoughIsSilentAndALowSoftLimitIsRaisedAndSaid) {
  const FdNeed need = fd_need(256, 256, true, false);
  EXPECT_EQ(ensure_fds(need, 100000, 100000).message, "");
  const FdCheck c = ensure_fds(need, 1024, 100000);
  EXPECT_TRUE(c.ok);
  EXPECT_NE(c.message.find("raised the open-file soft limit from 1024 to " + std::to_string(need.total())),
            std::string::npos)
      << c.message;
}

TEST(FdBudget, AHardLimitTooLowStopsTheJobSayingWhatToDo) {
  const FdCheck c = ensure_fds(fd_need(256, 256, true, true), 1024, 1024);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.message.find("the hard limit is 1024"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("ulimit -Hn"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("MCI_CONNECT"), std::string::npos) << c.message;
}

}  // namespace
}  // namespace mci::launch
