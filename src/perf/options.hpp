// mci-perf's command line: nccl-tests' flags where they apply, plus what mci
// adds (backend, transport, algorithm, machine-readable outputs).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mci/init.hpp"
#include "mci/types.hpp"
#include "perf/collective.hpp"
#include "perf/sweep.hpp"

namespace mci::perf {

// How one number is made from every rank's time (-a). The numbering is
// nccl-tests': 0 rank 0's, 1 the mean, 2 the fastest, 3 the slowest.
enum class Average { rank0 = 0, mean = 1, min = 2, max = 3 };
std::string_view average_name(Average a) noexcept;

struct Options {
  OpKind collective = OpKind::all_reduce;  // the point-to-point pair is send (perf/collective.hpp)
  SweepSpec sweep;
  int iters = 20;
  int warmup = 5;
  int check = 1;  // checked iterations per size and placement (0: none)
  // The op and type of the sweep being run; -o all and -d all list several,
  // run one after the other in nccl-tests' order (types outer, ops inner).
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::f32;
  std::vector<DType> dtypes{DType::f32};
  std::vector<ReduceOp> ops{ReduceOp::sum};
  // -m: operations per timed iteration (nccl-tests groups them in one
  // ncclGroupStart/End; mci has no group call, so they are issued back to
  // back); the time column is per operation.
  int agg_iters = 1;
  // -N: the whole sweep this many times, each printed (0: until stopped).
  int run_cycles = 1;
  bool report_cputime = false;     // -C: the time column is the time to issue, bandwidths still from completion
  bool report_timestamps = false;  // -S: a timestamp after each row
  // -g and -t as nccl-tests counts them (GPUs per thread, threads per
  // process): mci drives one rank per process, so mci-perf started alone
  // with -g N -t M starts N x M processes itself, through mcirun's launcher.
  int ngpus = 1;
  int nthreads = 1;
  // Flags accepted for nccl-tests' command lines that mean nothing here:
  // one line each, printed once by rank 0.
  std::vector<std::string> notices;
  int root = 0;
  // Host memory has no stream to queue on: a blocking call runs on the
  // caller's thread and is what a CPU training loop does, so it is the
  // default here (nccl-tests defaults to non-blocking for GPU streams).
  bool blocking = true;
  // The time of an iteration is the slowest rank's, as the job waits for it.
  Average average = Average::max;
  std::string backend = "cpu";
  mci::BackendCaps caps;  // the backend's row (mci/init.hpp), filled with it
  // Where the buffers live: the host, or GPU LOCAL_RANK (the default with
  // --backend nccl); device timings come from CUDA events.
  bool device_cuda = false;
  // Exported as MCI_TRANSPORT / MCI_ALGO before init when given; otherwise
  // whatever the environment says is reported.
  std::optional<std::string> transport;
  std::optional<std::string> algo;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string json_path;  // --json or nccl-tests' -J
  std::string csv_path;
  bool barrier_ref = false;       // time an 8-byte-class barrier after each size
  std::vector<std::string> argv;  // the command line, for the JSON record

  // Processes mci-perf starts itself: -g x -t.
  int ranks_to_start() const { return ngpus * nthreads; }
};

// What the command line asks for: a run, or text to print and an exit code
// (--help, --version).
struct ExitRequest {
  int code = 0;
  std::string text;
};
using ParseOutcome = std::variant<Options, ExitRequest>;

// Parses argv (argv[0] is the program). Throws UsageError with a message
// that names the flag and the accepted values.
ParseOutcome parse_options(const std::vector<std::string>& argv);

// Names accepted by -d: nccl-tests' (float, half, bfloat16, int8, ...) and
// mci's (f32, f16, bf16, i8, ...).
std::optional<DType> parse_dtype(std::string_view text);
std::optional<ReduceOp> parse_reduce_op(std::string_view text);
std::optional<Average> parse_average(std::string_view text);
// nccl-tests' name of a dtype for the table's type column: float, half, ...
std::string_view nccl_type_name(DType t) noexcept;
// What -d all and -o all run, in nccl-tests' order.
std::vector<DType> every_dtype();
std::vector<ReduceOp> every_reduce_op();

}  // namespace mci::perf
