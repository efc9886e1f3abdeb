#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "diag/flight_recorder.hpp"
#include "diag/hang_report.hpp"

namespace mci::diag {
namespace {

coll::CollectiveDesc desc(std::uint64_t seq, std::size_t count) {
  coll::CollectiveDesc d;
  d.kind = OpKind::all_reduce;
  d.seq = seq;
  d.count = count;
  d.dtype = DType::f32;
  return d;
}

TEST(FlightRecorder, RecordsStatesAndKeepsTheLastN) {
  FlightRecorder fr(4);
  for (std::uint64_t s = 1; s <= 6; ++s) {
    auto rec = fr.enqueue(desc(s, s * 10), now_ns());
    fr.start(rec, now_ns());
    EXPECT_EQ(fr.running(), rec.id);
    fr.finish(rec, s != 6, now_ns(), 1, 500);
  }
  EXPECT_EQ(fr.running(), 0u);
  auto recs = fr.last(10);
  ASSERT_EQ(recs.size(), 4u);  // ring of 4
  EXPECT_EQ(recs.front().seq, 3u);
  EXPECT_EQ(recs.back().seq, 6u);
  EXPECT_EQ(recs.back().state, OpState::failed);
  EXPECT_EQ(recs[2].state, OpState::completed);
  EXPECT_EQ(recs[2].last_rank, 1);
  EXPECT_EQ(recs[2].last_late_ns, 500);
  EXPECT_EQ(recs[2].describe(), "all_reduce #5 (f32 x 50, sum)");
  EXPECT_FALSE(fr.get(1));  // overwritten
}

TEST(FlightRecorder, PointToPointNamesThePeerOrAnySource) {
  OpRecord r;
  r.kind = OpKind::recv;
  r.count = 4;
  r.dtype = DType::f32;
  r.tag = 7;
  r.root = 2;
  EXPECT_EQ(r.describe(), "recv tag 7 (f32 x 4) from rank 2");
  r.root = any_source;
  EXPECT_EQ(r.describe(), "recv tag 7 (f32 x 4) from any source");
  r.kind = OpKind::send;
  r.root = 1;
  EXPECT_EQ(r.describe(), "send tag 7 (f32 x 4) to rank 1");
}

TEST(FlightRecorder, StateEncodingSaysWhereTheRankIs) {
  FlightRecorder fr(16);
  EXPECT_NE(encode_state(fr).find("last_completed=none"), std::string::npos);
  EXPECT_NE(encode_state(fr).find("idle_ms="), std::string::npos);
  auto rec = fr.enqueue(desc(1, 2), now_ns());
  fr.start(rec, now_ns());
  const std::string s = encode_state(fr);
  EXPECT_NE(s.find("running=all_reduce #1 (f32 x 2, sum)"), std::string::npos) << s;
  EXPECT_NE(s.find("entered=1"), std::string::npos) << s;
  fr.finish(rec, true, now_ns());
  EXPECT_NE(encode_state(fr).find("last_completed=all_reduce #1"), std::string::npos);
}

// A rank asked about a position it has already left (a failed call) still
// says what it called there: a mismatch is seen even after its own timeout.
TEST(FlightRecorder, StateSaysWhatTheRankCalledAtTheAskedPosition) {
  FlightRecorder fr(16);
  auto rec = fr.enqueue(desc(1, 2), now_ns());
  fr.start(rec, now_ns());
  fr.finish(rec, false, now_ns());
  EXPECT_NE(encode_state(fr, 1).find("at_seq=all_reduce #1 (f32 x 2, sum)\n"), std::string::npos)
      << encode_state(fr, 1);
  EXPECT_EQ(encode_state(fr, 2).find("at_seq="), std::string::npos);
  EXPECT_EQ(encode_state(fr).find("at_seq="), std::string::npos);
}

TEST(FlightRecorder, ReadersNeverSeeATornRecord) {
  FlightRecorder fr(8);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t s = 1; !stop; ++s) {
      auto rec = fr.enqueue(desc(s, s), now_ns());
      fr.start(rec, now_ns());
      fr.finish(rec, true, now_ns());
    }
  });
  for (int i = 0; i < 20000; ++i) {
    for (const auto& r : fr.last(8)) ASSERT_EQ(r.count, r.seq) << "torn record";
  }
  stop = true;
  writer.join();
}

TEST(FlightRecorder, CapacityZeroRecordsNothingButStillTracksWhatRuns) {
  FlightRecorder fr(0);
  auto rec = fr.enqueue(desc(1, 2), now_ns());
  fr.start(rec, now_ns());
  EXPECT_EQ(fr.running(), rec.id);
  EXPECT_FALSE(fr.get(rec.id));
  fr.finish(rec, true, now_ns());
  EXPECT_TRUE(fr.last(10).empty());
}

}  // namespace
}  // namespace mci::diag
