#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "diag/flight_recorder.hpp"
#include "diag/hang_report.hpp"
#include "store/records.hpp"

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
  EXPECT_EQ(rank_state(fr).last_completed, "none");
  EXPECT_TRUE(rank_state(fr).running.empty());  // in its own code: idle_ms counts
  auto rec = fr.enqueue(desc(1, 2), now_ns());
  fr.start(rec, now_ns());
  const records::RankState s = rank_state(fr);
  EXPECT_EQ(s.running, "all_reduce #1 (f32 x 2, sum)");
  EXPECT_EQ(s.running_seq, 1u);
  EXPECT_EQ(s.entered, 1u);
  EXPECT_EQ(s.idle_ms, 0u);
  fr.finish(rec, true, now_ns());
  EXPECT_EQ(rank_state(fr).last_completed.rfind("all_reduce #1", 0), 0u) << rank_state(fr).last_completed;
  // As it travels: a record that decodes to the same state.
  EXPECT_EQ(records::decode_rank_state(records::encode_rank_state(s), "test"), s);
}

// A rank asked about a position it has already left (a failed call) still
// says what it called there: a mismatch is seen even after its own timeout.
TEST(FlightRecorder, StateSaysWhatTheRankCalledAtTheAskedPosition) {
  FlightRecorder fr(16);
  auto rec = fr.enqueue(desc(1, 2), now_ns());
  fr.start(rec, now_ns());
  fr.finish(rec, false, now_ns());
  EXPECT_EQ(rank_state(fr, 1).at_seq, "all_reduce #1 (f32 x 2, sum)");
  EXPECT_EQ(rank_state(fr, 2).at_seq, "");
  EXPECT_EQ(rank_state(fr).at_seq, "");
}

// The request and the answer are records: what is not one is refused by
// name, a number past 32 bits (a long job's position) is read whole.
TEST(FlightRecorder, HangRequestsAndAnswersAreRecords) {
  const records::HangRequest q{3, 5'000'000'000ull};
  EXPECT_EQ(records::decode_hang_request(records::encode_hang_request(q), "test"), q);
  try {
    records::decode_rank_state("entered=1\nidle_ms=3\n", "store key 'diag/ans/1/0'");
    ADD_FAILURE() << "the old key=value text was read";
  } catch (const records::RecordError& e) {
    EXPECT_NE(std::string(e.what()).find("store key 'diag/ans/1/0'"), std::string::npos) << e.what();
  }
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
