#include "perf/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "mci/errors.hpp"
#include "mci/init.hpp"

#ifndef MCI_PERF_VERSION
#define MCI_PERF_VERSION "dev"
#endif

namespace mci::perf {

namespace {

// MCI_TRANSPORT's row: its choices are mci's transports (one per mesh
// kind, after auto and shm).
mci::SettingInfo transport_setting() {
  for (auto& s : mci::list_settings()) {
    if (s.name == "MCI_TRANSPORT") return s;
  }
  return {};
}

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

std::vector<DType> every_dtype() {
  return {DType::i8, DType::u8, DType::i32, DType::i64, DType::f16, DType::f32, DType::f64, DType::bf16};
}

std::vector<ReduceOp> every_reduce_op() {
  return {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg};
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

namespace {

// Every flag as typed: values are taken as text and checked after parsing,
// so every message names the flag, the value and what is accepted.
struct RawFlags {
  std::string collective, minb = "8", maxb = "32M", factor, stepb, iters = "20", warmup = "5", check = "1", op = "sum",
                          dtype = "float", root = "0", blocking = "1", average = "3", backend = "cpu", transport, algo,
                          device, timeout = "300", ngpus = "1", nthreads = "1", agg = "1", cycles = "1", cputime = "0",
                          stamps = "0", short_timeout, graph = "0", reg = "0", pinit = "0", stream_null = "0",
                          mem_report = "0";
};

// nccl-tests' flags (short and long, as nccl-tests spells them), then mci's.
void declare_sweep_flags(CLI::App& app, RawFlags& f) {
  app.add_option("collective", f.collective, "one of: " + collective_list())->type_name("COLLECTIVE");
  app.add_option("-b,--minbytes", f.minb, "smallest size, bytes with optional K/M/G suffix (default 8)")
      ->type_name("BYTES");
  app.add_option("-e,--maxbytes", f.maxb, "largest size (default 32M)")->type_name("BYTES");
  app.add_option("-f,--stepfactor", f.factor, "multiply the size by this each step (default 2)")->type_name("N");
  app.add_option("-i,--stepbytes", f.stepb, "add this many bytes each step instead (linear sweep)")->type_name("BYTES");
  app.add_option("-n,--iters", f.iters, "timed iterations per size (default 20)")->type_name("N");
  app.add_option("-w,--warmup_iters", f.warmup, "untimed iterations before each size (default 5)")->type_name("N");
  app.add_option("-c,--check", f.check,
                 "checked iterations per size: every element compared with a locally computed "
                 "reference, #wrong counted (0 disables; default 1)")
      ->type_name("N");
  app.add_option("-m,--agg_iters", f.agg,
                 "operations per timed iteration (nccl-tests groups them; mci issues them back to back); "
                 "the time is per operation (default 1)")
      ->type_name("N");
  app.add_option("-N,--run_cycles", f.cycles,
                 "run and print the whole sweep this many times (0: until stopped; default 1)")
      ->type_name("N");
  app.add_option("-o,--op", f.op, "reduce op: sum prod min max avg, or all: each in turn (default sum)")
      ->type_name("OP");
  app.add_option("-d,--datatype", f.dtype,
                 std::string("element type: ") + kDtypeChoices + ", or all: each in turn (default float)")
      ->type_name("TYPE");
  app.add_option("-r,--root", f.root, "root rank of broadcast, reduce, gather, scatter (default 0)")->type_name("RANK");
  app.add_option("-z,--blocking", f.blocking,
                 "1: each call blocks (default); 0: a batch of async calls, waited at the end")
      ->type_name("0|1");
  app.add_option("-a,--average", f.average,
                 "time of an iteration across ranks, nccl-tests numbering: 0 rank 0, 1 avg, 2 min, "
                 "3 max (default 3 = the slowest rank; names also work)")
      ->type_name("0-3");
}

void declare_group_flags(CLI::App& app, RawFlags& f) {
  std::string backends;
  for (const auto& b : mci::list_backends()) {
    backends +=
        (backends.empty() ? "" : "; ") + b.name + ": " + b.description + (b.built ? "" : " (not in this build)");
  }
  app.add_option("--backend", f.backend, backends + " (default cpu)")->type_name("NAME");
  app.add_option("--device", f.device,
                 "cpu or cuda: where the buffers live (default cpu; cuda for a backend on GPU memory only, nccl)")
      ->type_name("cpu|cuda");
  app.add_option("--transport", f.transport,
                 transport_setting().accepts + ": the group's MCI_TRANSPORT (InitOptions::settings; cpu backend)")
      ->type_name("NAME");
  app.add_option("--algo", f.algo,
                 "force an algorithm: the group's MCI_ALGO (InitOptions::settings; auto, ring, rd, direct, tree, "
                 "...; an unknown name lists them all with the collectives they serve)")
      ->type_name("NAME");
  app.add_option("--timeout", f.timeout, "group timeout in seconds: a hung collective fails after it (default 300)")
      ->type_name("SECONDS");
  app.add_option("-T", f.short_timeout, "nccl-tests' spelling of --timeout (0: mci's default, 300)")
      ->type_name("SECONDS");
}

void declare_output_flags(CLI::App& app, RawFlags& f, Options& o) {
  app.add_option("-C,--report_cputime", f.cputime,
                 "1: the time column is the time to issue the operations (CPU time), as nccl-tests -C 1; "
                 "bandwidths still come from the time to completion")
      ->type_name("0|1");
  app.add_option("-S,--report_timestamps", f.stamps, "1: a timestamp after each row")->type_name("0|1");
  app.add_option("-g,--ngpus", f.ngpus,
                 "ranks per thread as nccl-tests counts GPUs: mci-perf started alone starts -g x -t processes of "
                 "one rank each (one GPU each with --device cuda), through mcirun's launcher (default 1)")
      ->type_name("N");
  app.add_option("-t,--nthreads", f.nthreads, "threads per process in nccl-tests; here multiplies -g (default 1)")
      ->type_name("N");
  app.add_option("-J,--json,--output_file", o.json_path,
                 "write every result to this JSON file (rank 0): nccl-tests' keys, plus mci's")
      ->type_name("FILE");
  app.add_option("--csv", o.csv_path, "write every result to this CSV file (rank 0)")->type_name("FILE");
  app.add_flag("--barrier-ref", o.barrier_ref,
               "add a barrier_us column: the time of a barrier measured after each size, to see "
               "whether the machine's latency changed during the run");
  // nccl-tests' flags that mean nothing for mci: accepted, and said so.
  app.add_option("-G,--cudagraph", f.graph, "accepted for nccl-tests; CUDA graphs are not used (a notice says so)")
      ->type_name("N");
  app.add_option("-R,--local_register", f.reg, "accepted for nccl-tests; buffers are not registered (notice)")
      ->type_name("0|1|2");
  app.add_option("-p,--parallel_init", f.pinit, "accepted for nccl-tests; one rank per process, nothing to parallelise")
      ->type_name("0|1");
  app.add_option("-y,--stream_null", f.stream_null, "accepted for nccl-tests; mci chooses its streams (notice)")
      ->type_name("0|1");
  app.add_option("-M,--memory_report", f.mem_report, "accepted for nccl-tests; no GPU memory report (notice)")
      ->type_name("0|1");
}

// What to measure: the collective, its types and ops, the sizes.
void check_what(const RawFlags& f, Options& o) {
  if (f.collective.empty()) {
    throw UsageError("name the collective to measure first, e.g. mci-perf all_reduce -b 8 -e 128M; one of: " +
                     collective_list());
  }
  const auto coll = parse_collective(f.collective);
  if (!coll) throw UsageError("unknown collective '" + f.collective + "': use one of " + collective_list());
  o.collective = *coll;

  o.ngpus = static_cast<int>(parse_int(f.ngpus, "-g", 1, 1024));
  o.nthreads = static_cast<int>(parse_int(f.nthreads, "-t", 1, 1024));
  if (o.ranks_to_start() > 1024) throw UsageError("-g x -t: at most 1024 ranks on one machine");

  if (lower(f.dtype) == "all") {
    o.dtypes = every_dtype();
  } else {
    const auto dt = parse_dtype(f.dtype);
    if (!dt) throw UsageError("-d " + f.dtype + ": unknown type; use one of " + kDtypeChoices + ", or all");
    o.dtypes = {*dt};
  }
  o.dtype = o.dtypes.front();
  if (lower(f.op) == "all") {
    o.ops = every_reduce_op();
  } else {
    const auto rop = parse_reduce_op(f.op);
    if (!rop) throw UsageError("-o " + f.op + ": unknown reduce op; use sum, prod, min, max, avg or all");
    o.ops = {*rop};
  }
  // nccl-tests runs a collective without a reduce op once, whatever -o says.
  if (!uses_reduce_op(o.collective)) o.ops.resize(1);
  o.op = o.ops.front();
  const auto avg = parse_average(f.average);
  if (!avg) throw UsageError("-a " + f.average + ": use 0 (rank 0), 1 (avg), 2 (min) or 3 (max)");
  o.average = *avg;
}

void check_sweep(const RawFlags& f, Options& o) {
  o.sweep.min_bytes = parse_bytes(f.minb, "-b");
  o.sweep.max_bytes = parse_bytes(f.maxb, "-e");
  if (!f.factor.empty() && !f.stepb.empty()) {
    throw UsageError("-f and -i both given: choose a step factor (-f) or a step in bytes (-i)");
  }
  if (!f.factor.empty()) {
    o.sweep.step_factor = static_cast<std::size_t>(parse_int(f.factor, "-f", 2, 1 << 20));
  }
  if (!f.stepb.empty()) {
    o.sweep.step_bytes = parse_bytes(f.stepb, "-i");
    if (o.sweep.step_bytes == 0) throw UsageError("-i 0 never grows the size: give a step of one element or more");
  }
  for (DType t : o.dtypes) {
    const std::size_t es = dtype_size(t);
    auto multiple = [&](std::size_t bytes, const char* flag) {
      if (bytes % es != 0) {
        throw UsageError(std::string(flag) + " " + std::to_string(bytes) + " is not a multiple of the " +
                         std::to_string(es) + "-byte " + std::string(nccl_type_name(t)) +
                         " element: sizes are whole elements");
      }
    };
    multiple(o.sweep.min_bytes, "-b");
    multiple(o.sweep.max_bytes, "-e");
    multiple(o.sweep.step_bytes, "-i");
  }
  size_sweep(o.sweep);  // rejects sweeps that cannot run, before any rank joins
}

// How: iterations, blocking, reports, the timeout, and the flags that
// nccl-tests has and mci ignores (each a notice when set).
void check_how(const RawFlags& f, Options& o) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  o.iters = static_cast<int>(parse_int(f.iters, "-n", 1, kIntMax));
  o.warmup = static_cast<int>(parse_int(f.warmup, "-w", 0, kIntMax));
  o.check = static_cast<int>(parse_int(f.check, "-c", 0, kIntMax));
  o.root = static_cast<int>(parse_int(f.root, "-r", 0, kIntMax));
  o.agg_iters = static_cast<int>(parse_int(f.agg, "-m", 1, 1 << 20));
  o.run_cycles = static_cast<int>(parse_int(f.cycles, "-N", 0, kIntMax));
  o.blocking = parse_bool01(f.blocking, "-z");
  o.report_cputime = parse_bool01(f.cputime, "-C");
  o.report_timestamps = parse_bool01(f.stamps, "-S");
  o.timeout = std::chrono::seconds(parse_int(f.timeout, "--timeout", 1, 7 * 24 * 3600));
  if (!f.short_timeout.empty()) {
    // nccl-tests' -T 0 means no timeout; every wait in mci is bounded.
    const long long t = parse_int(f.short_timeout, "-T", 0, 7 * 24 * 3600);
    if (t > 0) {
      o.timeout = std::chrono::seconds(t);
    } else {
      o.notices.push_back("-T 0: mci bounds every wait; the timeout stays " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) + " s");
    }
  }
  auto ignored = [&](const std::string& value, const char* flag, long long hi, const std::string& why) {
    if (parse_int(value, flag, 0, hi) != 0) o.notices.push_back(std::string(flag) + " " + value + ": ignored, " + why);
  };
  ignored(f.graph, "-G", kIntMax, "mci-perf does not capture CUDA graphs (graph: 0 in the header)");
  ignored(f.reg, "-R", 2, "mci does not register buffers with NCCL");
  ignored(f.pinit, "-p", 1, "each process holds one rank, so there is no init to run in parallel");
  ignored(f.stream_null, "-y", 1, "mci chooses the streams its collectives run on");
  ignored(f.mem_report, "-M", 1, "mci-perf has no GPU memory report");
}

// "cpu, gloo or mpi": the backends whose row has the capability.
std::string backends_with(bool mci::BackendCaps::*cap) {
  std::vector<std::string> names;
  for (const auto& b : mci::list_backends()) {
    if (b.caps.*cap) names.push_back(b.name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return out;
}

// Where: the backend, the buffers' device, the transport and algorithm.
void check_where(const RawFlags& f, Options& o) {
  o.backend = lower(f.backend);
  const auto info = mci::find_backend_info(o.backend);
  if (!info) {
    std::string names;
    for (const auto& b : mci::list_backends()) names += (names.empty() ? "" : ", ") + b.name;
    throw UsageError("--backend " + f.backend + ": use " + names);
  }
  o.caps = info->caps;
  // The buffers' default home: the host where the backend takes it.
  const std::string dev = f.device.empty() ? (o.caps.host_memory ? "cpu" : "cuda") : lower(f.device);
  if (dev != "cpu" && dev != "cuda") throw UsageError("--device " + f.device + ": use cpu or cuda");
  o.device_cuda = dev == "cuda";
  if (o.device_cuda && !o.caps.cuda_memory) {
    throw UsageError("--device cuda: the " + o.backend + " backend works on host memory; use --backend " +
                     backends_with(&mci::BackendCaps::cuda_memory));
  }
  if (!o.device_cuda && !o.caps.host_memory) {
    throw UsageError("--device cpu: the " + o.backend + " backend works on GPU memory; use --device cuda, or " +
                     "--backend " + backends_with(&mci::BackendCaps::host_memory));
  }
  if (!f.transport.empty()) {
    const std::string t = lower(f.transport);
    const mci::SettingInfo row = transport_setting();
    if (std::find(row.choices.begin(), row.choices.end(), t) == row.choices.end())
      throw UsageError("--transport " + f.transport + ": use " + row.accepts);
    o.transport = t;
  }
  if (!f.algo.empty()) o.algo = f.algo;
}

}  // namespace

ParseOutcome parse_options(const std::vector<std::string>& argv) {
  CLI::App
      app{"mci-perf: nccl-tests-style bandwidth and latency sweeps of mci's collectives.\n"
          "One process per rank: mci-perf all_reduce -b 8 -e 128M -f 2 -g 4 starts 4 ranks itself (as mcirun\n"
          "--standalone --nproc_per_node=4 would); under a launcher (mcirun, srun, mpirun) each process is one rank;\n"
          "alone, without -g, it runs a job of one rank.",
          "mci-perf"};
  app.set_version_flag("--version", std::string("mci-perf ") + MCI_PERF_VERSION);
  RawFlags f;
  Options o;
  declare_sweep_flags(app, f);
  declare_group_flags(app, f);
  declare_output_flags(app, f, o);

  std::vector<const char*> args;
  for (const auto& a : argv) args.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp&) {
    return ExitRequest{0, app.help()};
  } catch (const CLI::CallForVersion&) {
    return ExitRequest{0, std::string("mci-perf ") + MCI_PERF_VERSION + "\n"};
  } catch (const CLI::ExtrasError&) {
    // CLI11 lists the extras last first ("1 -q"); say them as typed.
    std::string extras;
    for (const auto& a : app.remaining()) extras += (extras.empty() ? "" : " ") + a;
    throw UsageError("not an mci-perf option: " + extras +
                     " (mci-perf takes nccl-tests' flags -t -g -b -e -i -f -n -m -w -N -p -c -o -d -r -z -y -T -G -C "
                     "-S -J -a -R -M, and its own; see mci-perf --help)");
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see mci-perf --help)");
  }
  check_what(f, o);
  check_sweep(f, o);
  check_how(f, o);
  check_where(f, o);
  o.argv = argv;
  return o;
}

}  // namespace mci::perf
