// all_gather, gather, all_to_all, broadcast and scatter in shared memory
// from 16 KiB blocks,
// where each rank reads the others' blocks straight from their memory
// (single copy): the results, in place and not, a rank that turns single
// copy off, and ranks that mix in place and apart in one all_to_all (which
// must stage, all of them).
#include <gtest/gtest.h>

#include <vector>

#include "mci/mci.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

constexpr std::size_t kBlock = 20000;  // floats: 80 KB blocks, above the single-copy size

float value(int from, int to, std::size_t i) { return static_cast<float>(from * 1000 + to * 100 + i % 97); }

// `never_on`: the rank that sets MCI_SHM_SINGLE_COPY=never (-1: none).
std::vector<std::string> run(int world, int never_on, const std::function<void(ProcessGroup&)>& body) {
  return test::run_ranks(
      world, [&](std::shared_ptr<ProcessGroup> pg) { body(*pg); }, "cpu", std::chrono::seconds(20),
      [&](InitOptions& o) {
        o.settings["MCI_TRANSPORT"] = "shm";
        if (o.rank == never_on) o.settings["MCI_SHM_SINGLE_COPY"] = "never";
      });
}

void all_gather_every_way(ProcessGroup& pg) {
  const int n = pg.size(), r = pg.rank();
  for (int round = 0; round < 3; ++round) {  // after the first, single copy is decided
    std::vector<float> in(kBlock), out(kBlock * n, -1.0f);
    for (std::size_t i = 0; i < kBlock; ++i) in[i] = value(r, round, i);
    pg.all_gather(view(in), view(out));
    std::vector<float> inplace(kBlock * n, -1.0f);
    for (std::size_t i = 0; i < kBlock; ++i) inplace[kBlock * r + i] = value(r, round, i);
    pg.all_gather(BufferView{inplace.data() + kBlock * r, kBlock, DType::f32}, view(inplace));
    for (int src = 0; src < n; ++src) {
      for (std::size_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(out[kBlock * src + i], value(src, round, i)) << "rank " << r << " from " << src << " at " << i;
        ASSERT_EQ(inplace[kBlock * src + i], value(src, round, i)) << "in place, rank " << r << " from " << src;
      }
    }
    std::vector<float> gathered(r == 1 ? kBlock * n : 0, -1.0f);
    pg.gather(view(in), view(gathered), 1);
    if (r == 1) {
      for (int src = 0; src < n; ++src) ASSERT_EQ(gathered[kBlock * src + 5], value(src, round, 5));
    }
    // A small one between (staged): the steps stay in line.
    std::vector<float> small{static_cast<float>(r)}, all(n);
    pg.all_gather(view(small), view(all));
    for (int src = 0; src < n; ++src) ASSERT_EQ(all[src], static_cast<float>(src));
  }
}

// Rank r's block j of its input goes to rank j. `in_place`: whether this
// rank passes one buffer.
void all_to_all_once(ProcessGroup& pg, bool in_place) {
  const int n = pg.size(), r = pg.rank();
  std::vector<float> in(kBlock * n), out(kBlock * n, -1.0f);
  for (int j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < kBlock; ++i) in[kBlock * j + i] = value(r, j, i);
  }
  if (in_place) {
    pg.all_to_all(view(in), view(in));
    out = in;
  } else {
    pg.all_to_all(view(in), view(out));
  }
  for (int src = 0; src < n; ++src) {
    for (std::size_t i = 0; i < kBlock; ++i) {
      ASSERT_EQ(out[kBlock * src + i], value(src, r, i)) << "rank " << r << " from " << src << " at " << i;
    }
  }
}

// Broadcast and scatter from each root, in place at the root and not.
void broadcast_and_scatter(ProcessGroup& pg) {
  const int n = pg.size(), r = pg.rank();
  for (int root = 0; root < n; ++root) {
    std::vector<float> buf(kBlock, -1.0f);
    if (r == root) {
      for (std::size_t i = 0; i < kBlock; ++i) buf[i] = value(root, 7, i);
    }
    pg.broadcast(view(buf), root);
    for (std::size_t i = 0; i < kBlock; ++i) ASSERT_EQ(buf[i], value(root, 7, i)) << "rank " << r << " root " << root;
    std::vector<float> in(r == root ? kBlock * n : 0), out(kBlock, -1.0f);
    for (int j = 0; j < n && r == root; ++j) {
      for (std::size_t i = 0; i < kBlock; ++i) in[kBlock * j + i] = value(root, j, i);
    }
    pg.scatter(view(in), view(out), root);
    for (std::size_t i = 0; i < kBlock; ++i) ASSERT_EQ(out[i], value(root, r, i)) << "rank " << r << " root " << root;
  }
}

TEST(SingleCopy, BroadcastAndScatterFromEveryRoot) {
  for (int world : {2, 3}) {
    for (const auto& e : run(world, -1, broadcast_and_scatter)) EXPECT_EQ(e, "") << "world " << world;
  }
  for (const auto& e : run(3, 0, broadcast_and_scatter)) EXPECT_EQ(e, "") << "rank 0 says never";
}

TEST(SingleCopy, AllGatherAndGatherAreRightInPlaceOrNot) {
  for (int world : {2, 3}) {
    for (const auto& e : run(world, -1, all_gather_every_way)) EXPECT_EQ(e, "") << "world " << world;
  }
}

TEST(SingleCopy, ARankThatTurnsItOffStillGetsTheSameResults) {
  for (const auto& e : run(3, 1, all_gather_every_way)) EXPECT_EQ(e, "");
  for (const auto& e : run(3, 2, [](ProcessGroup& pg) { all_to_all_once(pg, false); })) EXPECT_EQ(e, "");
}

TEST(SingleCopy, AllToAllApartInPlaceAndMixed) {
  for (int world : {2, 3}) {
    const auto errors = run(world, -1, [](ProcessGroup& pg) {
      all_to_all_once(pg, false);           // every rank apart: single copy
      all_to_all_once(pg, true);            // every rank in place: staged
      all_to_all_once(pg, pg.rank() == 0);  // rank 0 in place: all stage
      all_to_all_once(pg, false);
    });
    for (const auto& e : errors) EXPECT_EQ(e, "") << "world " << world;
  }
}

}  // namespace
}  // namespace mci
