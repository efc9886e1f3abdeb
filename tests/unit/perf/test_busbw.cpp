// nccl-tests' bandwidth conventions and buffer layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "perf/busbw.hpp"
#include "perf/collective.hpp"
#include "perf/layout.hpp"

namespace mci::perf {
namespace {

TEST(PerfBusbw, FactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::all_reduce, 1), 0.0);
  for (OpKind c : {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_to_all, OpKind::gather, OpKind::scatter}) {
    EXPECT_DOUBLE_EQ(bus_factor(c, 4), 0.75) << collective_name(c);
    EXPECT_DOUBLE_EQ(bus_factor(c, 2), 0.5) << collective_name(c);
  }
  for (OpKind c : {OpKind::broadcast, OpKind::reduce, OpKind::send}) {
    EXPECT_DOUBLE_EQ(bus_factor(c, 3), 1.0) << collective_name(c);
  }
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::barrier, 4), 0.0);
}

TEST(PerfBusbw, AlgbwIsSizeOverTimeInDecimalGigabytes) {
  // 1 GB (1e9 bytes) all-reduced by 4 ranks in 0.5 s.
  const Bandwidth b = bandwidth(OpKind::all_reduce, 4, 1'000'000'000, 0.5);
  EXPECT_DOUBLE_EQ(b.algbw_GBps, 2.0);
  EXPECT_DOUBLE_EQ(b.busbw_GBps, 3.0);
  const Bandwidth g = bandwidth(OpKind::all_gather, 2, 4'000'000, 1e-3);
  EXPECT_DOUBLE_EQ(g.algbw_GBps, 4.0);
  EXPECT_DOUBLE_EQ(g.busbw_GBps, 2.0);
}

TEST(PerfBusbw, NoBandwidthForBarrierOrZeroTime) {
  EXPECT_EQ(bandwidth(OpKind::barrier, 4, 0, 1e-5).algbw_GBps, 0.0);
  EXPECT_EQ(bandwidth(OpKind::all_reduce, 4, 1024, 0.0).busbw_GBps, 0.0);
}

TEST(PerfLayout, SizeIsTheLargerBufferAsInNcclTests) {
  // 1024 floats, 4 ranks.
  Layout l = layout_for(OpKind::all_reduce, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.bytes, 4096u);
  l = layout_for(OpKind::all_gather, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 256u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.block_count, 256u);
  EXPECT_EQ(l.bytes, 4096u);
  l = layout_for(OpKind::reduce_scatter, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 256u);
  l = layout_for(OpKind::scatter, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 256u);
  l = layout_for(OpKind::gather, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 256u);
  EXPECT_EQ(l.out_count, 1024u);
  l = layout_for(OpKind::all_to_all, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.block_count, 256u);
  l = layout_for(OpKind::barrier, 1024, 4, 4);
  EXPECT_EQ(l.bytes, 0u);
}

TEST(PerfLayout, BlocksRoundDownWhenTheWorldDoesNotDivideTheSize) {
  // 8 bytes of float over 3 ranks: 2 elements, no whole block per rank.
  Layout l = layout_for(OpKind::all_gather, 2, 4, 3);
  EXPECT_EQ(l.block_count, 0u);
  EXPECT_EQ(l.bytes, 0u);
  l = layout_for(OpKind::reduce_scatter, 100, 4, 3);
  EXPECT_EQ(l.block_count, 33u);
  EXPECT_EQ(l.in_count, 99u);
  EXPECT_EQ(l.bytes, 396u);
}

// Every kind of the list (mci/op_kind.hpp) is measured, the receive with
// its send; its layout and bandwidth come from its row.
TEST(PerfLayout, EveryKindIsMeasuredFromItsRow) {
  for (OpKind k : kAllOpKinds) {
    const OpShape& s = op_shape(k);
    const std::string name(collective_name(k));
    const bool listed = std::find(kAllCollectives.begin(), kAllCollectives.end(), k) != kAllCollectives.end();
    EXPECT_EQ(listed, measured(k)) << name;
    EXPECT_TRUE(listed || (s.p2p && s.in == BufferExtent::none)) << name << " is not measured";
    EXPECT_EQ(parse_collective(name), measured(k) ? std::optional<OpKind>(k) : parse_collective("send_recv")) << name;
    EXPECT_EQ(nccl_program_name(k).ends_with("_perf"), true) << name;
    const Layout l = layout_for(k, 1200, 4, 4);
    const std::size_t block = s.in == BufferExtent::per_rank || s.out == BufferExtent::per_rank ? 300 : 1200;
    auto expected = [&](BufferExtent e) -> std::size_t {
      if (s.p2p) return 1200;
      return e == BufferExtent::none ? 0 : e == BufferExtent::per_rank ? block * 4 : block;
    };
    EXPECT_EQ(l.in_count, expected(s.in)) << name;
    EXPECT_EQ(l.out_count, expected(s.out)) << name;
    EXPECT_EQ(l.bytes, std::max(l.in_count, l.out_count) * 4) << name;
    EXPECT_EQ(bandwidth(k, 4, l.bytes, 1e-3).busbw_GBps, bandwidth(k, 4, l.bytes, 1e-3).algbw_GBps * bus_factor(k, 4))
        << name;
    EXPECT_EQ(has_in_place(k), moves_data(k) && !s.p2p) << name;
  }
  EXPECT_EQ(
      collective_list(),
      "all_reduce, broadcast, reduce, all_gather, gather, scatter, reduce_scatter, all_to_all, barrier, send_recv");
}

}  // namespace
}  // namespace mci::perf
