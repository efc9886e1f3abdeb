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

ParseOutcome parse_options(const std::vector<std::string>& argv) {
  CLI::App
      app{"mci-perf: nccl-tests-style bandwidth and latency sweeps of mci's collectives.\n"
          "One process per rank: mci-perf all_reduce -b 8 -e 128M -f 2 -g 4 starts 4 ranks itself (as mcirun\n"
          "--standalone --nproc_per_node=4 would); under a launcher (mcirun, srun, mpirun) each process is one rank;\n"
          "alone, without -g, it runs a job of one rank.",
          "mci-perf"};
  app.set_version_flag("--version", std::string("mci-perf ") + MCI_PERF_VERSION);
  // Values are taken as text and checked below, so every message names
  // the flag, the value and what is accepted.
  std::string collective, minb = "8", maxb = "32M", factor, stepb, iters = "20", warmup = "5", check = "1", op = "sum",
                          dtype = "float", root = "0", blocking = "1", average = "3", backend = "cpu", transport, algo,
                          device, timeout = "300", ngpus = "1", nthreads = "1", agg = "1", cycles = "1", cputime = "0",
                          stamps = "0", short_timeout, graph = "0", reg = "0", pinit = "0", stream_null = "0",
                          mem_report = "0";
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
  app.add_option("-m,--agg_iters", agg,
                 "operations per timed iteration (nccl-tests groups them; mci issues them back to back); "
                 "the time is per operation (default 1)")
      ->type_name("N");
  app.add_option("-N,--run_cycles", cycles,
                 "run and print the whole sweep this many times (0: until stopped; default 1)")
      ->type_name("N");
  app.add_option("-o,--op", op, "reduce op: sum prod min max avg, or all: each in turn (default sum)")->type_name("OP");
  app.add_option("-d,--datatype", dtype,
                 std::string("element type: ") + kDtypeChoices + ", or all: each in turn (default float)")
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
    backends +=
        (backends.empty() ? "" : "; ") + b.name + ": " + b.description + (b.built ? "" : " (not in this build)");
  }
  app.add_option("--backend", backend, backends + " (default cpu)")->type_name("NAME");
  app.add_option("--device", device,
                 "cpu or cuda: where the buffers live (default cpu; cuda for a backend on GPU memory only, nccl)")
      ->type_name("cpu|cuda");
  app.add_option("--transport", transport,
                 transport_setting().accepts + ": the group's MCI_TRANSPORT (InitOptions::settings; cpu backend)")
      ->type_name("NAME");
  app.add_option("--algo", algo,
                 "force an algorithm: the group's MCI_ALGO (InitOptions::settings; auto, ring, rd, direct, tree, "
                 "...; an unknown name lists them all with the collectives they serve)")
      ->type_name("NAME");
  app.add_option("--timeout", timeout, "group timeout in seconds: a hung collective fails after it (default 300)")
      ->type_name("SECONDS");
  app.add_option("-T", short_timeout, "nccl-tests' spelling of --timeout (0: mci's default, 300)")
      ->type_name("SECONDS");
  app.add_option("-C,--report_cputime", cputime,
                 "1: the time column is the time to issue the operations (CPU time), as nccl-tests -C 1; "
                 "bandwidths still come from the time to completion")
      ->type_name("0|1");
  app.add_option("-S,--report_timestamps", stamps, "1: a timestamp after each row")->type_name("0|1");
  app.add_option("-g,--ngpus", ngpus,
                 "ranks per thread as nccl-tests counts GPUs: mci-perf started alone starts -g x -t processes of "
                 "one rank each (one GPU each with --device cuda), through mcirun's launcher (default 1)")
      ->type_name("N");
  app.add_option("-t,--nthreads", nthreads, "threads per process in nccl-tests; here multiplies -g (default 1)")
      ->type_name("N");
  app.add_option("-J,--json,--output_file", o.json_path,
                 "write every result to this JSON file (rank 0): nccl-tests' keys, plus mci's")
      ->type_name("FILE");
  app.add_option("--csv", o.csv_path, "write every result to this CSV file (rank 0)")->type_name("FILE");
  app.add_flag("--barrier-ref", o.barrier_ref,
               "add a barrier_us column: the time of a barrier measured after each size, to see "
               "whether the machine's latency changed during the run");
  // nccl-tests' flags that mean nothing for mci: accepted, and said so.
  app.add_option("-G,--cudagraph", graph, "accepted for nccl-tests; CUDA graphs are not used (a notice says so)")
      ->type_name("N");
  app.add_option("-R,--local_register", reg, "accepted for nccl-tests; buffers are not registered (notice)")
      ->type_name("0|1|2");
  app.add_option("-p,--parallel_init", pinit, "accepted for nccl-tests; one rank per process, nothing to parallelise")
      ->type_name("0|1");
  app.add_option("-y,--stream_null", stream_null, "accepted for nccl-tests; mci chooses its streams (notice)")
      ->type_name("0|1");
  app.add_option("-M,--memory_report", mem_report, "accepted for nccl-tests; no GPU memory report (notice)")
      ->type_name("0|1");

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

  if (collective.empty()) {
    throw UsageError("name the collective to measure first, e.g. mci-perf all_reduce -b 8 -e 128M; one of: " +
                     collective_list());
  }
  const auto coll = parse_collective(collective);
  if (!coll) throw UsageError("unknown collective '" + collective + "': use one of " + collective_list());
  o.collective = *coll;

  o.ngpus = static_cast<int>(parse_int(ngpus, "-g", 1, 1024));
  o.nthreads = static_cast<int>(parse_int(nthreads, "-t", 1, 1024));
  if (o.ranks_to_start() > 1024) throw UsageError("-g x -t: at most 1024 ranks on one machine");

  if (lower(dtype) == "all") {
    o.dtypes = every_dtype();
  } else {
    const auto dt = parse_dtype(dtype);
    if (!dt) throw UsageError("-d " + dtype + ": unknown type; use one of " + kDtypeChoices + ", or all");
    o.dtypes = {*dt};
  }
  o.dtype = o.dtypes.front();
  if (lower(op) == "all") {
    o.ops = every_reduce_op();
  } else {
    const auto rop = parse_reduce_op(op);
    if (!rop) throw UsageError("-o " + op + ": unknown reduce op; use sum, prod, min, max, avg or all");
    o.ops = {*rop};
  }
  // nccl-tests runs a collective without a reduce op once, whatever -o says.
  if (!uses_reduce_op(o.collective)) o.ops.resize(1);
  o.op = o.ops.front();
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

  constexpr long long kIntMax = std::numeric_limits<int>::max();
  o.iters = static_cast<int>(parse_int(iters, "-n", 1, kIntMax));
  o.warmup = static_cast<int>(parse_int(warmup, "-w", 0, kIntMax));
  o.check = static_cast<int>(parse_int(check, "-c", 0, kIntMax));
  o.root = static_cast<int>(parse_int(root, "-r", 0, kIntMax));
  o.agg_iters = static_cast<int>(parse_int(agg, "-m", 1, 1 << 20));
  o.run_cycles = static_cast<int>(parse_int(cycles, "-N", 0, kIntMax));
  o.blocking = parse_bool01(blocking, "-z");
  o.report_cputime = parse_bool01(cputime, "-C");
  o.report_timestamps = parse_bool01(stamps, "-S");
  o.timeout = std::chrono::seconds(parse_int(timeout, "--timeout", 1, 7 * 24 * 3600));
  if (!short_timeout.empty()) {
    // nccl-tests' -T 0 means no timeout; every wait in mci is bounded.
    const long long t = parse_int(short_timeout, "-T", 0, 7 * 24 * 3600);
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
  ignored(graph, "-G", kIntMax, "mci-perf does not capture CUDA graphs (graph: 0 in the header)");
  ignored(reg, "-R", 2, "mci does not register buffers with NCCL");
  ignored(pinit, "-p", 1, "each process holds one rank, so there is no init to run in parallel");
  ignored(stream_null, "-y", 1, "mci chooses the streams its collectives run on");
  ignored(mem_report, "-M", 1, "mci-perf has no GPU memory report");

  o.backend = lower(backend);
  const auto info = mci::find_backend_info(o.backend);
  if (!info) {
    std::string names;
    for (const auto& b : mci::list_backends()) names += (names.empty() ? "" : ", ") + b.name;
    throw UsageError("--backend " + backend + ": use " + names);
  }
  o.caps = info->caps;
  // The buffers' default home: the host where the backend takes it.
  const std::string dev = device.empty() ? (o.caps.host_memory ? "cpu" : "cuda") : lower(device);
  if (dev != "cpu" && dev != "cuda") throw UsageError("--device " + device + ": use cpu or cuda");
  o.device_cuda = dev == "cuda";
  // "cpu, gloo or mpi": the backends whose row has the capability.
  const auto takes = [](bool mci::BackendCaps::*cap) {
    std::vector<std::string> names;
    for (const auto& b : mci::list_backends()) {
      if (b.caps.*cap) names.push_back(b.name);
    }
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    }
    return out;
  };
  if (o.device_cuda && !o.caps.cuda_memory) {
    throw UsageError("--device cuda: the " + o.backend + " backend works on host memory; use --backend " +
                     takes(&mci::BackendCaps::cuda_memory));
  }
  if (!o.device_cuda && !o.caps.host_memory) {
    throw UsageError("--device cpu: the " + o.backend + " backend works on GPU memory; use --device cuda, or " +
                     "--backend " + takes(&mci::BackendCaps::host_memory));
  }
  if (!transport.empty()) {
    const std::string t = lower(transport);
    const mci::SettingInfo row = transport_setting();
    if (std::find(row.choices.begin(), row.choices.end(), t) == row.choices.end())
      throw UsageError("--transport " + transport + ": use " + row.accepts);
    o.transport = t;
  }
  if (!algo.empty()) o.algo = algo;
  o.argv = argv;
  return o;
}

}  // namespace mci::perf
