// nccl-tests' bandwidth conventions and buffer layouts.
#include <gtest/gtest.h>

#include "perf/busbw.hpp"
#include "perf/layout.hpp"

namespace mci::perf {
namespace {

TEST(PerfBusbw, FactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 1), 0.0);
  for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all, Collective::gather,
                       Collective::scatter}) {
    EXPECT_DOUBLE_EQ(bus_factor(c, 4), 0.75) << collective_name(c);
    EXPECT_DOUBLE_EQ(bus_factor(c, 2), 0.5) << collective_name(c);
  }
  for (Collective c : {Collective::broadcast, Collective::reduce, Collective::send_recv}) {
    EXPECT_DOUBLE_EQ(bus_factor(c, 3), 1.0) << collective_name(c);
  }
  EXPECT_DOUBLE_EQ(bus_factor(Collective::barrier, 4), 0.0);
}

TEST(PerfBusbw, AlgbwIsSizeOverTimeInDecimalGigabytes) {
  // 1 GB (1e9 bytes) all-reduced by 4 ranks in 0.5 s.
  const Bandwidth b = bandwidth(Collective::all_reduce, 4, 1'000'000'000, 0.5);
  EXPECT_DOUBLE_EQ(b.algbw_GBps, 2.0);
  EXPECT_DOUBLE_EQ(b.busbw_GBps, 3.0);
  const Bandwidth g = bandwidth(Collective::all_gather, 2, 4'000'000, 1e-3);
  EXPECT_DOUBLE_EQ(g.algbw_GBps, 4.0);
  EXPECT_DOUBLE_EQ(g.busbw_GBps, 2.0);
}

TEST(PerfBusbw, NoBandwidthForBarrierOrZeroTime) {
  EXPECT_EQ(bandwidth(Collective::barrier, 4, 0, 1e-5).algbw_GBps, 0.0);
  EXPECT_EQ(bandwidth(Collective::all_reduce, 4, 1024, 0.0).busbw_GBps, 0.0);
}

TEST(PerfLayout, SizeIsTheLargerBufferAsInNcclTests) {
  // 1024 floats, 4 ranks.
  Layout l = layout_for(Collective::all_reduce, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.bytes, 4096u);
  l = layout_for(Collective::all_gather, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 256u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.block_count, 256u);
  EXPECT_EQ(l.bytes, 4096u);
  l = layout_for(Collective::reduce_scatter, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 256u);
  l = layout_for(Collective::scatter, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 256u);
  l = layout_for(Collective::gather, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 256u);
  EXPECT_EQ(l.out_count, 1024u);
  l = layout_for(Collective::all_to_all, 1024, 4, 4);
  EXPECT_EQ(l.in_count, 1024u);
  EXPECT_EQ(l.out_count, 1024u);
  EXPECT_EQ(l.block_count, 256u);
  l = layout_for(Collective::barrier, 1024, 4, 4);
  EXPECT_EQ(l.bytes, 0u);
}

TEST(PerfLayout, BlocksRoundDownWhenTheWorldDoesNotDivideTheSize) {
  // 8 bytes of float over 3 ranks: 2 elements, no whole block per rank.
  Layout l = layout_for(Collective::all_gather, 2, 4, 3);
  EXPECT_EQ(l.block_count, 0u);
  EXPECT_EQ(l.bytes, 0u);
  l = layout_for(Collective::reduce_scatter, 100, 4, 3);
  EXPECT_EQ(l.block_count, 33u);
  EXPECT_EQ(l.in_count, 99u);
  EXPECT_EQ(l.bytes, 396u);
}

}  // namespace
}  // namespace mci::perf
