// One POSIX shared-memory segment per group of ranks on the same host: a
// control block per rank (sequence flags and the fingerprint of what it
// posted) and, per rank, two staging buffers and two result buffers of a
// fixed size, used alternately so a rank can fill one while the others still
// read the other. The segment is unlinked as soon as every rank has mapped
// it, so a crash leaves nothing in /dev/shm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mci::transport {

inline constexpr std::uint64_t kShmMagic = 0x314d48534943ULL;  // "MCISHM1"
inline constexpr std::size_t kShmFingerprintWords = 4;
inline constexpr std::size_t kShmReasonBytes = 2048;

// What a rank posts for steps of one parity, in two cache lines, so a reader
// gets the flag, the fingerprint and a small payload in one transfer.
inline constexpr std::size_t kShmSmallBytes = 128 - 16 - 8 * kShmFingerprintWords;

struct alignas(128) ShmBox {
  std::atomic<std::uint64_t> ready{0};  // the last step of this parity posted
  std::atomic<std::uint64_t> fp[kShmFingerprintWords];
  std::atomic<std::int64_t> arrival_ns{0};  // when the poster entered the operation
  std::uint8_t small[kShmSmallBytes];       // payloads that fit travel here
};

struct alignas(128) ShmControl {
  ShmBox box[2];                                       // by step parity
  alignas(128) std::atomic<std::uint64_t> reduced{0};  // last step whose result buffer is posted
  // Ranks sleeping in the kernel (futex) on box[0].ready, box[1].ready and
  // reduced, so a poster makes the wake-up system call only when someone sleeps.
  std::atomic<std::uint32_t> sleepers[3] = {};
  std::atomic<std::int64_t> pid{0};
  // The CPU + 1 its waiting thread was last seen on (0: not yet; CpuSpread).
  std::atomic<std::int32_t> cpu{0};
};

struct ShmHeader {
  std::atomic<std::uint64_t> magic{0};
  std::uint32_t ranks = 0;
  std::uint32_t pad = 0;
  std::uint64_t buffer_bytes = 0;
  std::atomic<std::uint32_t> aborted{0};
  std::atomic<std::int32_t> aborted_by{-1};
  char reason[kShmReasonBytes] = {};
};

class ShmSegment {
 public:
  // Rank 0 creates (exclusive), the others open. Throws mci::Error on failure.
  static ShmSegment create(const std::string& name, int ranks, std::size_t buffer_bytes);
  static ShmSegment open(const std::string& name, int ranks, std::size_t buffer_bytes);
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&&) = delete;
  ShmSegment(const ShmSegment&) = delete;
  ~ShmSegment();

  // Removes the name; the mapping stays valid for everyone who has it.
  void unlink();

  ShmHeader& header() const { return *static_cast<ShmHeader*>(base_); }
  ShmControl& control(int rank) const { return controls_[rank]; }
  // Staging and result buffers of `rank`, parity 0 or 1.
  std::uint8_t* staging(int rank, int parity) const {
    return data_ + stride_ * (4 * static_cast<std::size_t>(rank) + static_cast<std::size_t>(parity));
  }
  std::uint8_t* result(int rank, int parity) const { return staging(rank, parity) + 2 * stride_; }
  std::size_t buffer_bytes() const { return buffer_bytes_; }
  int ranks() const { return ranks_; }
  const std::string& name() const { return name_; }

  static std::size_t total_bytes(int ranks, std::size_t buffer_bytes);

 private:
  ShmSegment(std::string name, void* base, std::size_t bytes, int ranks, std::size_t buffer_bytes, bool owner);
  std::string name_;
  void* base_;
  std::size_t bytes_;
  int ranks_;
  std::size_t buffer_bytes_;
  bool linked_;
  // Hot-path addresses, computed once.
  ShmControl* controls_;
  std::uint8_t* data_;
  std::size_t stride_;  // one buffer, rounded up to a page
};

}  // namespace mci::transport
