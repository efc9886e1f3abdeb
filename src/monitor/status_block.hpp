// A rank's status block: the memory its flight recorders write and its
// launcher reads, so `mcirun --monitor` sees every operation of every rank
// without a message per operation (the ranks pay nothing beyond the
// recorder's own stores: the block *is* the recorder's ring).
//
// mcirun creates one memfd per rank process and passes its descriptor in
// MCI_MONITOR_FD. The rank grows it: a header page, then one area per
// process group it creates (the world group first), each an area header
// (who, the group's timeout, the running operation, per-kind counters) and
// the group's ring of operation slots. The launcher maps the file read-only
// and reads it with the recorder's seqlock rules. A memfd has no name: when
// the rank and mcirun are gone, so is the memory, even after SIGKILL.
//
// Every field is a 64-bit atomic at a fixed offset (both sides are the
// same build of mci); `kVersion` changes whenever the layout does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/algo.hpp"
#include "common/op_kind.hpp"
#include "mci/types.hpp"

namespace mci::monitor {

inline constexpr std::uint64_t kMagic = 0x314e4f4d4943ull;  // "MCIMON1" (little-endian)
inline constexpr std::uint64_t kVersion = 2;
inline constexpr std::size_t kMaxAreas = 16;  // groups a process creates beyond this are not shown
inline constexpr std::size_t kPage = 4096;

// One operation, as the flight recorder writes it (a seqlock: an odd
// version while being written).
struct OpSlot {
  static constexpr int kWords = 11;
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::uint64_t> w[kWords];
};

// Per operation kind, what this rank's group did (only the recorder's
// thread writes: a load and a store, never a locked read-modify-write).
struct KindCounters {
  std::atomic<std::uint64_t> ops{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> bytes{0};    // nccl-tests' "size" of each operation, summed
  std::atomic<std::uint64_t> busy_ns{0};  // each operation's duration_ns(), summed
};

struct AreaHeader {
  std::atomic<std::uint64_t> capacity{0};  // slots in the ring (a power of two)
  std::atomic<std::uint64_t> rank{0};      // in the group
  std::atomic<std::uint64_t> size{0};
  std::atomic<std::uint64_t> timeout_ms{0};
  std::atomic<std::uint64_t> next_id{1};  // the recorder's operation counter
  std::atomic<std::uint64_t> running{0};  // the operation running now, 0 if none
  std::atomic<std::int64_t> idle_since_ns{0};
  std::atomic<std::uint64_t> closed{0};  // the group was destroyed
  char backend[32]{};                    // written before the area is published
  char name[64]{};                       // the group's name ("world", "shrink-2", ...)
  KindCounters kinds[kOpKindCount];
};
static_assert(sizeof(AreaHeader) <= kPage);

struct BlockHeader {
  std::atomic<std::uint64_t> magic{0};
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::uint64_t> pid{0};
  std::atomic<std::uint64_t> global_rank{0};
  std::atomic<std::uint64_t> areas{0};  // published areas (release after each is complete)
  // The signal that makes this process dump its flight recorders (0: none
  // installed): the launcher sends it only to a rank that says so, since
  // the signal's default action would end any other.
  std::atomic<std::uint64_t> dump_signal{0};
  struct Entry {
    std::atomic<std::uint64_t> offset{0};
    std::atomic<std::uint64_t> bytes{0};
  } area[kMaxAreas];
  char host[64]{};
};
static_assert(sizeof(BlockHeader) <= kPage);

// What a rank's area holds, wherever it lives (the block, or the
// recorder's own memory when no launcher watches).
struct AreaView {
  AreaHeader* header = nullptr;
  OpSlot* slots = nullptr;  // header->capacity of them
};

// The rank's side: the block of this process, when mcirun passed one
// (MCI_MONITOR_FD), else nullptr. The descriptor is the process's, so the
// block is too: every group of the process takes an area of it.
class BlockWriter {
 public:
  static BlockWriter* of_process();
  // A new area for a group: nullopt when the block is full or cannot grow
  // (the group then records in its own memory, unseen).
  std::optional<AreaView> add_area(std::size_t capacity, int rank, int size, std::uint64_t timeout_ms,
                                   const std::string& backend, const std::string& name);
  // The process now dumps its flight recorders on `signo`.
  void set_dump_signal(int signo);

  explicit BlockWriter(int fd);
  ~BlockWriter();
  BlockWriter(const BlockWriter&) = delete;
  BlockWriter& operator=(const BlockWriter&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Memory for an area that no launcher sees (no block, or it is full).
class PrivateArea {
 public:
  explicit PrivateArea(std::size_t capacity);
  AreaView view() { return {&header_, slots_.get()}; }

 private:
  AreaHeader header_;
  std::unique_ptr<OpSlot[]> slots_;
};

// Rounds a recorder capacity up to the power of two the ring uses (1 for 0).
std::size_t ring_capacity(std::size_t wanted);

// ---- the launcher's side ----------------------------------------------

// One operation as read back from a slot.
enum class OpState : std::uint8_t { enqueued = 0, started, completed, failed };
const char* state_name(OpState s);

struct OpRecord {
  std::uint64_t id = 0;   // operation number in the group (1-based, p2p included)
  std::uint64_t seq = 0;  // collective sequence number (0 for p2p)
  std::uint64_t count = 0;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::u8;
  ReduceOp op = ReduceOp::sum;
  Algo algo = Algo::unset;
  OpState state = OpState::enqueued;
  std::int32_t root = -1;  // root, or the peer of a send/recv
  std::int32_t tag = 0;
  std::int64_t enqueued_ns = 0;  // steady clock
  std::int64_t started_ns = 0;
  std::int64_t ended_ns = 0;
  std::int32_t last_rank = -1;    // who entered last, when the backend knows
  std::int64_t last_late_ns = 0;  // how long after this rank it entered
  // The device's own time for the operation, between CUDA events on the
  // group's stream (nccl); 0 when it was timed on the host.
  std::int64_t device_ns = 0;

  // How long the operation took: the device's time when it was timed with
  // CUDA events (the host's window also holds the wait for work queued
  // before it), else the host's, from start to end.
  std::int64_t duration_ns() const { return device_ns > 0 ? device_ns : ended_ns - started_ns; }
};

// The slot codec, shared by the recorder (writes) and every reader.
std::uint64_t slot_word(const OpRecord& r, int i);
std::optional<OpRecord> read_slot(const OpSlot& s);

// nccl-tests' "size" of an operation: the bytes of its largest buffer.
std::uint64_t op_bytes(const OpRecord& r, int group_size);

struct AreaSnapshot {
  std::string name;
  std::string backend;
  int rank = 0;
  int size = 0;
  std::uint64_t timeout_ms = 0;
  bool closed = false;
  std::optional<OpRecord> running;  // the operation running now
  std::int64_t idle_since_ns = 0;
  std::uint64_t last_id = 0;
  std::vector<OpRecord> recent;  // up to `recent` of the last operations, oldest first
  struct Kind {
    std::uint64_t ops = 0, failed = 0, bytes = 0, busy_ns = 0;
  };
  Kind kinds[kOpKindCount];
};

struct BlockSnapshot {
  std::uint64_t pid = 0;
  int dump_signal = 0;
  int global_rank = -1;
  std::string host;
  std::vector<AreaSnapshot> areas;
};

// Maps a block read-only (again when the rank grew it) and reads it.
class BlockReader {
 public:
  explicit BlockReader(int fd);  // does not take ownership
  ~BlockReader();
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;
  // nullopt until the rank has written its header. `after_id`: per area,
  // the newest id the caller already has (recent then holds only newer
  // ones, at most `recent`).
  std::optional<BlockSnapshot> read(std::size_t recent, const std::vector<std::uint64_t>& after_id = {});

 private:
  bool remap();
  int fd_;
  void* base_ = nullptr;
  std::size_t mapped_ = 0;
};

// The memfd a launcher makes for one rank; its descriptor is inherited by
// the rank (not close-on-exec there: the launcher clears the flag in the
// child only).
class BlockFile {
 public:
  explicit BlockFile(const std::string& label);
  ~BlockFile();
  BlockFile(BlockFile&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  BlockFile& operator=(BlockFile&&) = delete;
  BlockFile(const BlockFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace mci::monitor
