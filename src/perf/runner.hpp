// Runs the sweep on one rank: for each size, warm up, time a batch of
// iterations (nccl-tests' method: one clock around the batch, divided by
// the iterations, then combined across ranks with -a; the slowest rank's by
// default), then run the checked iterations. With -c, the first warm-up
// call of each size and the timed calls' output (out of place) are
// checked too. Every rank calls the same
// sequence of collectives, including the few that share the results.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "mci/device_memory.hpp"
#include "mci/process_group.hpp"
#include "mci/work.hpp"
#include "perf/layout.hpp"
#include "perf/options.hpp"
#include "perf/result.hpp"

namespace mci::perf {

// Barriers timed per row for --barrier-ref.
inline constexpr int kBarrierRefIters = 10;
// The rounds (check.hpp) of the checked warm-up calls start here, apart
// from the checked iterations' rounds.
inline constexpr int kWarmupRounds = 1 << 24;

class Runner {
 public:
  // Allocates the buffers for the largest size of the sweep. Throws
  // UsageError when the options do not fit the group (root out of range,
  // send_recv on one rank).
  Runner(ProcessGroup& pg, const Options& o);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  const std::vector<std::size_t>& sizes() const { return sizes_; }
  // Where the buffers live (cpu, or cuda:N with --device cuda).
  Device device() const { return device_; }
  // Measures size number `index` of sizes(): a collective call on every rank.
  Row run(std::size_t index);

 private:
  struct Views {
    BufferView in, out;
  };
  struct Buffer {
    struct Free {
      void operator()(void* p) const noexcept;
    };
    std::unique_ptr<void, Free> data;
    std::size_t bytes = 0;
    explicit Buffer(std::size_t bytes);
    std::uint8_t* get() const { return static_cast<std::uint8_t*>(data.get()); }
  };

  // The views the collectives run on (device memory with --device cuda),
  // and the host views checks fill and read.
  Views views(const Layout& l, bool in_place) const;
  Views host_views(const Layout& l, bool in_place) const;
  Views views_on(const Layout& l, bool in_place, std::uint8_t* a, std::uint8_t* b, Device d) const;
  void issue(const Views& v, Exec e, std::vector<Work>& pending);
  struct Timing {
    double seconds = 0;        // per operation, to completion
    double issue_seconds = 0;  // per operation, until the last was issued (-C)
  };
  // Per operation on this rank, after `warmup` untimed calls.
  Timing time_batch(const Views& v, int warmup);
  double time_barriers();
  // Wrong elements on this rank over the checked iterations.
  std::uint64_t check(const Layout& l, bool in_place, int round_base);
  // One call on round `round`'s data, its result checked; and the check
  // alone of what the last call left in the output.
  std::uint64_t checked_call(const Layout& l, bool in_place, int round);
  std::uint64_t verify_result(const Layout& l, bool in_place, int round);
  void prepare(const Layout& l, const Views& v, int round);
  std::uint64_t verify(const Layout& l, const Views& v, int round) const;
  // Combines a per-rank value across ranks as -a says.
  void combine_times(std::vector<double>& values);

  ProcessGroup& pg_;
  const Options o_;  // a copy: the runner may outlive the caller's options
  int rank_;
  int ranks_;
  std::size_t es_;
  bool narrow_;
  std::vector<std::size_t> sizes_;
  Buffer a_;  // out-of-place input
  Buffer b_;  // out-of-place output; the one buffer of in-place runs
  // With --device cuda: the buffers the collectives use; a_ and b_ are then
  // host mirrors for checks.
  Device device_ = Device::cpu();
  std::unique_ptr<DeviceMemory> da_, db_;
};

}  // namespace mci::perf
