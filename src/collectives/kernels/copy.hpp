// Copies into memory that another core will read next.
//
// Two ways to write: plain stores keep the data in the cache, where the
// reader finds it; streaming (non-temporal) stores bypass the cache. Which
// wins depends on the host, and on a VM it changes while a job runs: in one
// state, writing a cache line the other core has just read costs tens of
// nanoseconds per line (plain copies into shared memory crawl at ~2 GB/s
// while streaming stores reach 27-31 GB/s); in the other, plain copies are
// fast and the reader gains from the cache (10-45% more all-reduce
// bandwidth than streaming, measured side by side on this project's VM).
// So a SharedCopier watches what its own plain copies cost and streams only
// while they are slow, probing plain stores again now and then.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mci::coll {

// Below this many bytes plain stores always win (measured: ~16 KiB).
inline constexpr std::size_t kStreamingThreshold = 16 * 1024;

// Plain memcpy below kStreamingThreshold, streaming stores above. Ends with a
// store fence, so a release store of a flag after it publishes the data.
void copy_to_shared(void* dst, const void* src, std::size_t n);

class SharedCopier {
 public:
  // Plain copies slower than this (bytes per ns = GB/s) mean the lines are
  // bouncing between cores: stream instead.
  static constexpr double kSlowRate = 4.0;
  // While streaming, one large copy in this many probes plain stores.
  static constexpr std::uint32_t kProbeEvery = 32;
  // Plain copies not counted at first (page faults of fresh buffers).
  static constexpr std::uint64_t kWarmupCopies = 8;

  // adaptive: as above; plain or streaming: always that way (MCI_SHM_STREAMING).
  enum class Mode : std::uint8_t { adaptive, plain, streaming };

  explicit SharedCopier(double slow_rate = kSlowRate, Mode mode = Mode::adaptive)
      : slow_rate_(slow_rate), mode_(mode), streaming_(mode == Mode::streaming) {}

  // Copies n bytes into shared memory the way that is cheaper now.
  void copy(void* dst, const void* src, std::size_t n);
  bool streaming() const { return streaming_; }

 private:
  void timed_plain(void* dst, const void* src, std::size_t n);

  double slow_rate_;
  Mode mode_;
  bool streaming_;
  double plain_rate_ = 0;  // moving average of plain copies, bytes per ns
  std::uint32_t since_probe_ = 0;
  std::uint64_t samples_ = 0;
};

}  // namespace mci::coll
