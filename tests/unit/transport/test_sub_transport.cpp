// SubTransport over a loopback of 4 ranks with members {1, 3}: sub-rank i is
// base rank members[i], and its frames travel between those base ranks only.
#include <gtest/gtest.h>

#include "support/fingerprints.hpp"

#include "mci/errors.hpp"
#include "support/loopback_ranks.hpp"
#include "support/loopback_transport.hpp"
#include "transport/sub_transport.hpp"

namespace mci::transport {
namespace {

using namespace std::chrono_literals;

using test::with_loopback;

Fingerprint coll(std::uint64_t seq) { return test::coll_fingerprint(seq, 1, OpKind::all_gather, DType::i32); }

const std::vector<int> kMembers = {1, 3};

TEST(SubTransport, MapsSubRanksToBaseRanks) {
  with_loopback(4, [](LoopbackTransport& base) {
    if (base.rank() % 2 == 0) return;
    SubTransport sub(base, kMembers);
    EXPECT_EQ(sub.size(), 2);
    EXPECT_EQ(sub.rank(), base.rank() == 1 ? 0 : 1);
    EXPECT_EQ(kMembers[static_cast<std::size_t>(sub.rank())], base.rank());
    EXPECT_STREQ(sub.name(), base.name());
  });
}

TEST(SubTransport, FramesReachTheMemberBaseRank) {
  with_loopback(4, [](LoopbackTransport& base) {
    const int r = base.rank();
    const Deadline dl(5000ms);
    if (r == 1 || r == 3) {
      SubTransport sub(base, kMembers);
      const int peer = 1 - sub.rank();
      int mine = 100 + r, got = -1;
      sub.post_send(peer, coll(1), &mine, 4);
      const OpHandle h = sub.post_recv(peer, coll(1), &got, 4);
      sub.wait(h, dl);
      EXPECT_TRUE(sub.done(h));
      sub.wait_all(dl);
      EXPECT_EQ(got, 100 + (r == 1 ? 3 : 1)) << "sub-peer " << peer << " is base rank " << kMembers[peer];
      // Aborting or closing a view is its owner's business: the base stays usable.
      sub.abort("a view cannot abort the group");
      sub.close();
    }
    // Base rank 1 now tells the others apart through the base itself: had
    // the sub-transport's frame gone to rank 0 or 2, it would be the first
    // frame they get from rank 1 and fail this receive's fingerprint.
    if (r == 1) {
      int v[4] = {0, 10, 20, 30};
      for (int p : {0, 2, 3}) base.post_send(p, coll(2), &v[p], 4);
      base.wait_all(dl);
    } else {
      int got = -1;
      base.post_recv(1, coll(2), &got, 4);
      base.wait_all(dl);
      EXPECT_EQ(got, 10 * r);
    }
  });
}

TEST(SubTransport, ProgressAndReapGoToTheBase) {
  with_loopback(4, [](LoopbackTransport& base) {
    if (base.rank() % 2 == 0) return;
    SubTransport sub(base, kMembers);
    const int peer = 1 - sub.rank();
    int mine = sub.rank(), got = -1;
    const Deadline dl(5000ms);
    sub.post_send(peer, coll(1), &mine, 4);
    const OpHandle h = sub.post_recv(peer, coll(1), &got, 4);
    while (!sub.done(h)) sub.progress(10ms, dl);
    sub.reap();
    EXPECT_EQ(got, peer);
    sub.wait_all(dl);
  });
}

}  // namespace
}  // namespace mci::transport
