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

struct alignas(128) ShmControl {
  std::atomic<std::uint64_t> ready{0};     // last step whose staging data is posted
  std::atomic<std::uint64_t> reduced{0};   // last step whose result buffer is posted
  std::atomic<std::uint64_t> consumed{0};  // last step this rank finished reading
  // Ranks sleeping in the kernel (futex) on each flag above, so a poster
  // makes the wake-up system call only when someone sleeps.
  std::atomic<std::uint32_t> sleepers[3] = {};
  std::atomic<std::uint64_t> fp[2][kShmFingerprintWords];  // per buffer parity
  std::atomic<std::int64_t> pid{0};
  std::atomic<std::int64_t> arrival_ns[2] = {};  // wall clock entry into an op, by op parity
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
  ShmControl& control(int rank) const;
  // Staging and result buffers of `rank`, parity 0 or 1.
  std::uint8_t* staging(int rank, int parity) const;
  std::uint8_t* result(int rank, int parity) const;
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
};

}  // namespace mci::transport
