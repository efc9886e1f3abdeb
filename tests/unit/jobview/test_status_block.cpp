// The status block: what a rank's flight recorder writes into the memfd
// mcirun gave it, read back the way the launcher reads it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "diag/flight_recorder.hpp"
#include "monitor/status_block.hpp"

namespace mci::monitor {
namespace {

coll::CollectiveDesc all_reduce(std::uint64_t seq, std::size_t count) {
  coll::CollectiveDesc d;
  d.kind = OpKind::all_reduce;
  d.seq = seq;
  d.count = count;
  d.dtype = DType::f32;
  return d;
}

TEST(StatusBlock, TheLauncherReadsWhatTheRecorderWrites) {
  BlockFile file("test");
  BlockWriter writer(file.fd());
  auto area = writer.add_area(8, /*rank=*/1, /*size=*/4, /*timeout_ms=*/5000, "cpu", "default");
  ASSERT_TRUE(area);
  diag::FlightRecorder fr(8, *area);
  BlockReader reader(file.fd());
  for (std::uint64_t i = 1; i <= 11; ++i) {
    auto r = fr.enqueue(all_reduce(i, 256), 100 * i, /*started=*/true);
    fr.finish(r, true, 100 * i + 40);
  }
  auto running = fr.enqueue(all_reduce(12, 256), 2000, true);

  auto snap = reader.read(4);
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->pid, static_cast<std::uint64_t>(::getpid()));
  ASSERT_EQ(snap->areas.size(), 1u);
  const AreaSnapshot& a = snap->areas[0];
  EXPECT_EQ(a.name, "default");
  EXPECT_EQ(a.backend, "cpu");
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.size, 4);
  EXPECT_EQ(a.timeout_ms, 5000u);
  EXPECT_EQ(a.last_id, 12u);
  ASSERT_TRUE(a.running);
  EXPECT_EQ(a.running->seq, 12u);
  EXPECT_EQ(a.running->state, OpState::started);
  ASSERT_EQ(a.recent.size(), 4u);  // ids 9..12, oldest first
  EXPECT_EQ(a.recent.front().seq, 9u);
  EXPECT_EQ(a.recent[2].ended_ns - a.recent[2].started_ns, 40);
  const auto& c = a.kinds[static_cast<std::size_t>(OpKind::all_reduce)];
  EXPECT_EQ(c.ops, 11u);
  EXPECT_EQ(c.bytes, 11u * 256 * 4);
  EXPECT_EQ(c.busy_ns, 11u * 40);

  // Only what is newer than what the caller has.
  snap = reader.read(100, {10});
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->areas[0].recent.size(), 2u);
  EXPECT_EQ(snap->areas[0].recent.front().id, 11u);
  fr.finish(running, false, 3000);
  snap = reader.read(1);
  EXPECT_FALSE(snap->areas[0].running);
  EXPECT_EQ(snap->areas[0].kinds[0].failed, 1u);
}

// An operation timed with CUDA events (nccl) is read back with the device's
// time as its duration, in the record and the per-kind busy time alike; one
// timed on the host keeps its host window.
TEST(StatusBlock, ADeviceTimedOperationCarriesTheDevicesTime) {
  BlockFile file("test");
  BlockWriter writer(file.fd());
  auto area = writer.add_area(8, /*rank=*/0, /*size=*/2, /*timeout_ms=*/5000, "nccl", "default");
  ASSERT_TRUE(area);
  diag::FlightRecorder fr(8, *area);
  BlockReader reader(file.fd());
  // The host waited 900 ns (work queued before it on the stream); the GPU
  // ran it in 120.
  auto gpu = fr.enqueue(all_reduce(1, 256), 1000, /*started=*/true);
  fr.finish(gpu, true, 1900, -1, 0, /*device_ns=*/120);
  auto host = fr.enqueue(all_reduce(2, 256), 2000, /*started=*/true);
  fr.finish(host, true, 2300);

  auto snap = reader.read(8);
  ASSERT_TRUE(snap);
  const AreaSnapshot& a = snap->areas.at(0);
  ASSERT_EQ(a.recent.size(), 2u);
  EXPECT_EQ(a.recent[0].device_ns, 120);
  EXPECT_EQ(a.recent[0].ended_ns - a.recent[0].started_ns, 900);  // the host's window is kept beside it
  EXPECT_EQ(a.recent[0].duration_ns(), 120);
  EXPECT_EQ(a.recent[1].device_ns, 0);
  EXPECT_EQ(a.recent[1].duration_ns(), 300);
  EXPECT_EQ(a.kinds[static_cast<std::size_t>(OpKind::all_reduce)].busy_ns, 120u + 300u);
}

TEST(StatusBlock, AGroupCreatedLaterIsSeenAfterTheBlockGrew) {
  BlockFile file("test");
  BlockWriter writer(file.fd());
  BlockReader reader(file.fd());
  ASSERT_TRUE(writer.add_area(4, 0, 2, 1000, "cpu", "default"));
  ASSERT_EQ(reader.read(1)->areas.size(), 1u);
  auto second = writer.add_area(1024, 0, 1, 1000, "gloo", "shrink-1");
  ASSERT_TRUE(second);
  diag::FlightRecorder fr(1024, *second);
  auto r = fr.enqueue(all_reduce(1, 2), 10, true);
  fr.finish(r, true, 20);
  auto snap = reader.read(8);
  ASSERT_EQ(snap->areas.size(), 2u);
  EXPECT_EQ(snap->areas[1].name, "shrink-1");
  EXPECT_EQ(snap->areas[1].recent.size(), 1u);
}

TEST(StatusBlock, ABlockFullOfGroupsRefusesMoreAndTheRecorderStillWorks) {
  BlockFile file("test");
  BlockWriter writer(file.fd());
  for (std::size_t i = 0; i < kMaxAreas; ++i) ASSERT_TRUE(writer.add_area(2, 0, 1, 1, "cpu", "g"));
  EXPECT_FALSE(writer.add_area(2, 0, 1, 1, "cpu", "one too many"));
  diag::FlightRecorder own(4);  // the recorder's own memory, as without a launcher
  auto r = own.enqueue(all_reduce(1, 1), 1, true);
  own.finish(r, true, 2);
  EXPECT_EQ(own.last(4).size(), 1u);
}

// A process that inherited a live rank's descriptor (a helper it started)
// leaves the rank's block alone.
TEST(StatusBlock, AnotherLiveProcessCannotTakeTheBlock) {
  BlockFile file("test");
  BlockWriter writer(file.fd());
  ASSERT_TRUE(writer.add_area(4, 0, 2, 1000, "cpu", "default"));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      BlockWriter thief(file.fd());
      ::_exit(1);
    } catch (const std::exception&) {
      ::_exit(0);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child took the block";
  BlockReader reader(file.fd());
  auto snap = reader.read(1);
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->pid, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(snap->areas.size(), 1u);
}

TEST(StatusBlock, AnEmptyOrForeignFileReadsAsNothing) {
  BlockFile file("test");
  BlockReader reader(file.fd());
  EXPECT_FALSE(reader.read(1));  // the rank has not written its header yet
  std::string junk(8192, 'x');
  ASSERT_EQ(::write(file.fd(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  EXPECT_FALSE(reader.read(1));
}

TEST(StatusBlock, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::broadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::reduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::send, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::barrier, 4), 0.0);
  OpRecord r;
  r.kind = OpKind::all_gather;
  r.count = 10;
  r.dtype = DType::f64;
  EXPECT_EQ(op_bytes(r, 4), 320u);  // nccl-tests' size: the whole gathered buffer
}

}  // namespace
}  // namespace mci::monitor
