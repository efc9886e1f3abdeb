#include "perf/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "mci/init.hpp"
#include "perf/usage_error.hpp"

#ifndef MCI_PERF_VERSION
#define MCI_PERF_VERSION "dev"
#endif

namespace mci::perf {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

long long parse_int(const std::string& text, std::string_view flag, long long lo, long long hi) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || p != end || text.empty()) {
    throw UsageError(std::string(flag) + " " + text + ": expected a whole number");
  }
  if (v < lo || v > hi) {
    throw UsageError(std::string(flag) + " " + text + ": must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi));
  }
  return v;
}

bool parse_bool01(const std::string& text, std::string_view flag) {
  if (text == "0") return false;
  if (text == "1") return true;
  throw UsageError(std::string(flag) + " " + text + ": expected 0 or 1");
}

constexpr const char* kDtypeChoices =
    "float double half bfloat16 int8 uint8 int32 int64 (or f32 f64 f16 bf16 i8 u8 i32 i64)";

}  // namespace

std::string_view average_name(Average a) noexcept {
  switch (a) {
    case Average::rank0: return "rank0";
    case Average::mean: return "avg";
    case Average::min: return "min";
    case Average::max: return "max";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  struct Name {
    const char* name;
    DType t;
  };
  static constexpr Name kNames[] = {
      {"float", DType::f32},   {"f32", DType::f32},       {"float32", DType::f32}, {"double", DType::f64},
      {"f64", DType::f64},     {"float64", DType::f64},   {"half", DType::f16},    {"f16", DType::f16},
      {"float16", DType::f16}, {"bfloat16", DType::bf16}, {"bf16", DType::bf16},   {"int8", DType::i8},
      {"i8", DType::i8},       {"char", DType::i8},       {"uint8", DType::u8},    {"u8", DType::u8},
      {"int32", DType::i32},   {"i32", DType::i32},       {"int", DType::i32},     {"int64", DType::i64},
      {"i64", DType::i64},
  };
  const std::string want = lower(text);
  for (const auto& n : kNames) {
    if (want == n.name) return n.t;
  }
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view text) {
  const std::string want = lower(text);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    if (want == reduce_op_name(op)) return op;
  }
  return std::nullopt;
}

std::optional<Average> parse_average(std::string_view text) {
  const std::string want = lower(text);
  if (want == "0" || want == "rank0") return Average::rank0;
  if (want == "1" || want == "avg" || want == "mean") return Average::mean;
  if (want == "2" || want == "min") return Average::min;
  if (want == "3" || want == "max") return Average::max;
  return std::nullopt;
}

std::string_view nccl_type_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

ParseOutcome parse_options(const std::vector<std::string>& argv) {
  CLI::App app{
      "mci-perf: nccl-tests-style bandwidth and latency sweeps of mci's collectives.\n"
      "Run one process per rank, e.g.: mcirun --nproc_per_node=2 mci-perf all_reduce -b 8 -e 128M -f 2",
      "mci-perf"};
  app.set_version_flag("--version", std::string("mci-perf ") + MCI_PERF_VERSION);
  // Values are taken as text and checked below, so every message names
  // the flag, the value and what is accepted.
  std::string collective, minb = "8", maxb = "32M", factor, stepb, iters = "20", warmup = "5", check = "1", op = "sum",
                          dtype = "float", root = "0", blocking = "1", average = "3", backend = "cpu", transport, algo, device,
                          timeout = "300", ngpus = "1", nthreads = "1";
  Options o;
  app.add_option("collective", collective, "one of: " + collective_list())->type_name("COLLECTIVE");
  app.add_option("-b,--minbytes", minb, "smallest size, bytes with optional K/M/G suffix (default 8)")
      ->type_name("BYTES");
  app.add_option("-e,--maxbytes", maxb, "largest size (default 32M)")->type_name("BYTES");
  app.add_option("-f,--stepfactor", factor, "multiply the size by this each step (default 2)")->type_name("N");
  app.add_option("-i,--stepbytes", stepb, "add this many bytes each step instead (linear sweep)")->type_name("BYTES");
  app.add_option("-n,--iters", iters, "timed iterations per size (default 20)")->type_name("N");
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations before each size (default 5)")->type_name("N");
  app.add_option("-c,--check", check,
                 "checked iterations per size: every element compared with a locally computed "
                 "reference, #wrong counted (0 disables; default 1)")
      ->type_name("N");
  app.add_option("-o,--op", op, "reduce op: sum prod min max avg (default sum)")->type_name("OP");
  app.add_option("-d,--datatype", dtype, std::string("element type: ") + kDtypeChoices + " (default float)")
      ->type_name("TYPE");
  app.add_option("-r,--root", root, "root rank of broadcast, reduce, gather, scatter (default 0)")->type_name("RANK");
  app.add_option("-z,--blocking", blocking,
                 "1: each call blocks (default); 0: a batch of async calls, waited at the end")
      ->type_name("0|1");
  app.add_option("-a,--average", average,
                 "time of an iteration across ranks, nccl-tests numbering: 0 rank 0, 1 avg, 2 min, "
                 "3 max (default 3 = the slowest rank; names also work)")
      ->type_name("0-3");
  std::string backends;
  for (const auto& b : mci::list_backends()) {
    backends += (backends.empty() ? "" : "; ") + b.name + ": " + b.description + (b.built ? "" : " (not in this build)");
  }
  app.add_option("--backend", backend, backends + " (default cpu)")->type_name("NAME");
  app.add_option("--device", device, "cpu or cuda: where the buffers live (default cpu; cuda with --backend nccl)")
      ->type_name("cpu|cuda");
  app.add_option("--transport", transport, "auto, shm or tcp: exported as MCI_TRANSPORT (cpu backend)")
      ->type_name("NAME");
  app.add_option("--algo", algo,
                 "force an algorithm: exported as MCI_ALGO (auto, ring, rd, direct, tree, ...; an unknown name "
                 "lists them all with the collectives they serve)")
      ->type_name("NAME");
  app.add_option("--timeout", timeout, "group timeout in seconds: a hung collective fails after it (default 300)")
      ->type_name("SECONDS");
  app.add_option("--json", o.json_path, "write every result to this JSON file (rank 0)")->type_name("FILE");
  app.add_option("--csv", o.csv_path, "write every result to this CSV file (rank 0)")->type_name("FILE");
  app.add_flag("--barrier-ref", o.barrier_ref,
               "add a barrier_us column: the time of a barrier measured after each size, to see "
               "whether the machine's latency changed during the run");
  // nccl-tests users pass these out of habit; one rank per process here.
  app.add_option("-g,--ngpus", ngpus)->group("");
  app.add_option("-t,--nthreads", nthreads)->group("");

  std::vector<const char*> args;
  for (const auto& a : argv) args.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp&) {
    return ExitRequest{0, app.help()};
  } catch (const CLI::CallForVersion&) {
    return ExitRequest{0, std::string("mci-perf ") + MCI_PERF_VERSION + "\n"};
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see mci-perf --help)");
  }

  if (collective.empty()) {
    throw UsageError("name the collective to measure first, e.g. mci-perf all_reduce -b 8 -e 128M; one of: " +
                     collective_list());
  }
  const auto coll = parse_collective(collective);
  if (!coll) throw UsageError("unknown collective '" + collective + "': use one of " + collective_list());
  o.collective = *coll;

  if (ngpus != "1" || nthreads != "1") {
    throw UsageError("-g/-t: mci-perf drives one rank per process; start several with mcirun --nproc_per_node=N");
  }

  const auto dt = parse_dtype(dtype);
  if (!dt) throw UsageError("-d " + dtype + ": unknown type; use one of " + kDtypeChoices);
  o.dtype = *dt;
  const auto rop = parse_reduce_op(op);
  if (!rop) throw UsageError("-o " + op + ": unknown reduce op; use sum, prod, min, max or avg");
  o.op = *rop;
  const auto avg = parse_average(average);
  if (!avg) throw UsageError("-a " + average + ": use 0 (rank 0), 1 (avg), 2 (min) or 3 (max)");
  o.average = *avg;

  o.sweep.min_bytes = parse_bytes(minb, "-b");
  o.sweep.max_bytes = parse_bytes(maxb, "-e");
  if (!factor.empty() && !stepb.empty()) {
    throw UsageError("-f and -i both given: choose a step factor (-f) or a step in bytes (-i)");
  }
  if (!factor.empty()) {
    o.sweep.step_factor = static_cast<std::size_t>(parse_int(factor, "-f", 2, 1 << 20));
  }
  if (!stepb.empty()) {
    o.sweep.step_bytes = parse_bytes(stepb, "-i");
    if (o.sweep.step_bytes == 0) throw UsageError("-i 0 never grows the size: give a step of one element or more");
  }
  const std::size_t es = dtype_size(o.dtype);
  auto multiple = [&](std::size_t bytes, const char* flag) {
    if (bytes % es != 0) {
      throw UsageError(std::string(flag) + " " + std::to_string(bytes) + " is not a multiple of the " +
                       std::to_string(es) + "-byte " + std::string(nccl_type_name(o.dtype)) +
                       " element: sizes are whole elements");
    }
  };
  multiple(o.sweep.min_bytes, "-b");
  multiple(o.sweep.max_bytes, "-e");
  multiple(o.sweep.step_bytes, "-i");
  size_sweep(o.sweep);  // rejects sweeps that cannot run, before any rank joins

  constexpr long long kIntMax = std::numeric_limits<int>::max();
  o.iters = static_cast<int>(parse_int(iters, "-n", 1, kIntMax));
  o.warmup = static_cast<int>(parse_int(warmup, "-w", 0, kIntMax));
  o.check = static_cast<int>(parse_int(check, "-c", 0, kIntMax));
  o.root = static_cast<int>(parse_int(root, "-r", 0, kIntMax));
  o.blocking = parse_bool01(blocking, "-z");
  o.timeout = std::chrono::seconds(parse_int(timeout, "--timeout", 1, 7 * 24 * 3600));

  o.backend = lower(backend);
  const auto known = mci::list_backends();
  if (std::none_of(known.begin(), known.end(), [&](const mci::BackendInfo& b) { return b.name == o.backend; })) {
    std::string names;
    for (const auto& b : known) names += (names.empty() ? "" : ", ") + b.name;
    throw UsageError("--backend " + backend + ": use " + names);
  }
  const std::string dev = device.empty() ? (o.backend == "nccl" ? "cuda" : "cpu") : lower(device);
  if (dev != "cpu" && dev != "cuda") throw UsageError("--device " + device + ": use cpu or cuda");
  o.device_cuda = dev == "cuda";
  if (o.device_cuda && o.backend == "gloo") {
    throw UsageError("--device cuda: the gloo backend works on host memory; use --backend nccl or cpu");
  }
  if (!transport.empty()) {
    const std::string t = lower(transport);
    if (t != "auto" && t != "shm" && t != "tcp")
      throw UsageError("--transport " + transport + ": use auto, shm or tcp");
    o.transport = t;
  }
  if (!algo.empty()) o.algo = algo;
  o.argv = argv;
  return o;
}

}  // namespace mci::perf
