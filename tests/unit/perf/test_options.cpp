// mci-perf's command line: nccl-tests' flags, mci's names, and a clear
// message for everything it cannot run.
#include <gtest/gtest.h>

#include "mci/errors.hpp"
#include "perf/options.hpp"

namespace mci::perf {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mci-perf");
  auto out = parse_options(args);
  EXPECT_TRUE(std::holds_alternative<Options>(out));
  return std::get<Options>(out);
}

std::string error_of(std::vector<std::string> args) {
  args.insert(args.begin(), "mci-perf");
  try {
    parse_options(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PerfOptions, DefaultsAreASweepOfFloatSumsTimedAsTheSlowestRank) {
  const Options o = parse({"all_reduce"});
  EXPECT_EQ(o.collective, OpKind::all_reduce);
  EXPECT_EQ(o.sweep.min_bytes, 8u);
  EXPECT_EQ(o.sweep.max_bytes, 32u << 20);
  EXPECT_EQ(o.sweep.step_factor, 2u);
  EXPECT_EQ(o.sweep.step_bytes, 0u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.op, ReduceOp::sum);
  EXPECT_EQ(o.dtype, DType::f32);
  EXPECT_EQ(o.root, 0);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.average, Average::max);
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_FALSE(o.transport);
  EXPECT_FALSE(o.algo);
  EXPECT_FALSE(o.barrier_ref);
}

TEST(PerfOptions, NcclTestsShortFlags) {
  const Options o = parse({"reduce", "-b", "1K",  "-e", "2M",       "-f", "4", "-n", "7", "-w", "0", "-c",
                           "0",      "-o", "max", "-d", "bfloat16", "-r", "1", "-z", "0", "-a", "1"});
  EXPECT_EQ(o.collective, OpKind::reduce);
  EXPECT_EQ(o.sweep.min_bytes, 1024u);
  EXPECT_EQ(o.sweep.max_bytes, 2u << 20);
  EXPECT_EQ(o.sweep.step_factor, 4u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.op, ReduceOp::max);
  EXPECT_EQ(o.dtype, DType::bf16);
  EXPECT_EQ(o.root, 1);
  EXPECT_FALSE(o.blocking);
  EXPECT_EQ(o.average, Average::mean);
}

TEST(PerfOptions, NcclTestsLongFlagsAndMciFlags) {
  const Options o = parse({"--minbytes",     "64",         "--maxbytes",    "64",       "--iters",     "3",
                           "--warmup_iters", "2",          "--datatype",    "i64",      "--op",        "prod",
                           "--average",      "min",        "--backend",     "gloo",     "--transport", "tcp",
                           "--algo",         "ring",       "--timeout",     "30",       "--json",      "/tmp/x.json",
                           "--csv",          "/tmp/x.csv", "--barrier-ref", "broadcast"});
  EXPECT_EQ(o.collective, OpKind::broadcast);
  EXPECT_EQ(o.sweep.min_bytes, 64u);
  EXPECT_EQ(o.dtype, DType::i64);
  EXPECT_EQ(o.op, ReduceOp::prod);
  EXPECT_EQ(o.average, Average::min);
  EXPECT_EQ(o.backend, "gloo");
  EXPECT_EQ(o.transport, "tcp");
  EXPECT_EQ(o.algo, "ring");
  EXPECT_EQ(o.timeout, std::chrono::seconds(30));
  EXPECT_EQ(o.json_path, "/tmp/x.json");
  EXPECT_EQ(o.csv_path, "/tmp/x.csv");
  EXPECT_TRUE(o.barrier_ref);
}

TEST(PerfOptions, TheBackendsRowGivesTheDefaultDeviceAndCapabilities) {
  const Options nccl = parse({"all_reduce", "--backend", "nccl"});
  EXPECT_TRUE(nccl.device_cuda);
  EXPECT_TRUE(nccl.caps.gpu_per_rank);
  const Options cpu = parse({"all_reduce", "--backend", "cpu"});
  EXPECT_FALSE(cpu.device_cuda);
  EXPECT_TRUE(cpu.caps.mci_transports);
  EXPECT_TRUE(parse({"all_reduce", "--backend", "cpu", "--device", "cuda"}).device_cuda);
  EXPECT_FALSE(parse({"all_reduce", "--backend", "gloo"}).caps.mci_transports);
}

TEST(PerfOptions, StepBytesMakesALinearSweep) {
  const Options o = parse({"all_gather", "-b", "1M", "-e", "4M", "-i", "1M"});
  EXPECT_EQ(o.sweep.step_bytes, 1u << 20);
}

TEST(PerfOptions, EveryCollectiveByNameAndByNcclTestsSpelling) {
  for (OpKind c : kAllCollectives) {
    EXPECT_EQ(parse({std::string(collective_name(c))}).collective, c);
  }
  EXPECT_EQ(parse({"allreduce"}).collective, OpKind::all_reduce);
  EXPECT_EQ(parse({"alltoall"}).collective, OpKind::all_to_all);
  EXPECT_EQ(parse({"sendrecv"}).collective, OpKind::send);
  EXPECT_EQ(parse({"reduce-scatter"}).collective, OpKind::reduce_scatter);
}

TEST(PerfOptions, DtypeNamesOfNcclTestsAndOfMci) {
  const std::pair<const char*, DType> cases[] = {
      {"float", DType::f32}, {"f32", DType::f32}, {"double", DType::f64},    {"f64", DType::f64},
      {"half", DType::f16},  {"f16", DType::f16}, {"bfloat16", DType::bf16}, {"bf16", DType::bf16},
      {"int8", DType::i8},   {"i8", DType::i8},   {"uint8", DType::u8},      {"u8", DType::u8},
      {"int32", DType::i32}, {"i32", DType::i32}, {"int64", DType::i64},     {"i64", DType::i64},
  };
  for (const auto& [name, t] : cases) {
    EXPECT_EQ(parse_dtype(name), t) << name;
    EXPECT_EQ(parse({"all_reduce", "-d", name}).dtype, t) << name;
  }
  EXPECT_EQ(nccl_type_name(DType::f32), "float");
  EXPECT_EQ(nccl_type_name(DType::bf16), "bfloat16");
}

TEST(PerfOptions, AverageUsesNcclTestsNumberingOrNames) {
  EXPECT_EQ(parse_average("0"), Average::rank0);
  EXPECT_EQ(parse_average("1"), Average::mean);
  EXPECT_EQ(parse_average("2"), Average::min);
  EXPECT_EQ(parse_average("3"), Average::max);
  EXPECT_EQ(parse_average("max"), Average::max);
  EXPECT_FALSE(parse_average("4"));
}

TEST(PerfOptions, HelpAndVersionAreNotErrors) {
  auto help = parse_options({"mci-perf", "--help"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(help));
  EXPECT_EQ(std::get<ExitRequest>(help).code, 0);
  EXPECT_NE(std::get<ExitRequest>(help).text.find("--minbytes"), std::string::npos);
  EXPECT_NE(std::get<ExitRequest>(help).text.find("all_reduce"), std::string::npos);
  auto version = parse_options({"mci-perf", "--version"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(version));
  EXPECT_NE(std::get<ExitRequest>(version).text.find("mci-perf"), std::string::npos);
}

TEST(PerfOptions, TheRestOfNcclTestsFlags) {
  Options o = parse(
      {"all_reduce", "-g", "4", "-t", "2", "-m", "3", "-N", "2", "-C", "1", "-S", "1", "-T", "9", "-J", "/tmp/r.json"});
  EXPECT_EQ(o.ngpus, 4);
  EXPECT_EQ(o.nthreads, 2);
  EXPECT_EQ(o.ranks_to_start(), 8);
  EXPECT_EQ(o.agg_iters, 3);
  EXPECT_EQ(o.run_cycles, 2);
  EXPECT_TRUE(o.report_cputime);
  EXPECT_TRUE(o.report_timestamps);
  EXPECT_EQ(o.timeout, std::chrono::seconds(9));
  EXPECT_EQ(o.json_path, "/tmp/r.json");
  EXPECT_TRUE(o.notices.empty());
  o = parse({"all_reduce", "--output_file", "/tmp/s.json", "--agg_iters", "2", "--run_cycles", "0"});
  EXPECT_EQ(o.json_path, "/tmp/s.json");
  EXPECT_EQ(o.run_cycles, 0);
  // What means nothing here is accepted, and said once.
  o = parse({"all_reduce", "-G", "10", "-R", "1", "-p", "1", "-y", "1", "-M", "1", "-T", "0"});
  ASSERT_EQ(o.notices.size(), 6u);
  EXPECT_NE(o.notices[0].find("-T 0: mci bounds every wait"), std::string::npos) << o.notices[0];
  EXPECT_NE(o.notices[1].find("-G 10: ignored, mci-perf does not capture CUDA graphs"), std::string::npos);
  EXPECT_NE(o.notices[2].find("-R 1: ignored"), std::string::npos);
  EXPECT_EQ(o.timeout, std::chrono::seconds(300));
  // Their defaults say nothing.
  EXPECT_TRUE(parse({"all_reduce", "-G", "0", "-R", "0", "-p", "0", "-y", "0"}).notices.empty());
}

TEST(PerfOptions, AllTypesAndAllOpsInNcclTestsOrder) {
  Options o = parse({"all_reduce", "-d", "all", "-o", "all"});
  EXPECT_EQ(o.dtypes, every_dtype());
  EXPECT_EQ(o.dtypes.front(), DType::i8);
  EXPECT_EQ(o.ops, (std::vector<ReduceOp>{ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg}));
  EXPECT_EQ(o.dtype, DType::i8);
  EXPECT_EQ(o.op, ReduceOp::sum);
  // A collective without a reduce op runs once per type.
  o = parse({"all_gather", "-o", "all"});
  EXPECT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.dtypes, std::vector<DType>{DType::f32});
  // nccl-tests' program names work as the collective.
  EXPECT_EQ(parse({"alltoall_perf"}).collective, OpKind::all_to_all);
  EXPECT_EQ(parse({"all_reduce_perf"}).collective, OpKind::all_reduce);
}

TEST(PerfOptions, ClearMessagesForWhatCannotRun) {
  auto has = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };
  std::string e = error_of({});
  EXPECT_TRUE(has(e, "name the collective")) << e;
  e = error_of({"allreduc"});
  EXPECT_TRUE(has(e, "unknown collective 'allreduc'")) << e;
  EXPECT_TRUE(has(e, "all_reduce, broadcast")) << e;
  e = error_of({"all_reduce", "-b", "6"});
  EXPECT_TRUE(has(e, "-b 6 is not a multiple of the 4-byte float element")) << e;
  e = error_of({"all_reduce", "-d", "i64", "-e", "20"});
  EXPECT_TRUE(has(e, "-e 20 is not a multiple of the 8-byte int64")) << e;
  e = error_of({"all_reduce", "-i", "6"});
  EXPECT_TRUE(has(e, "-i 6 is not a multiple")) << e;
  e = error_of({"all_reduce", "-b", "1X"});
  EXPECT_TRUE(has(e, "unknown suffix")) << e;
  e = error_of({"all_reduce", "-b", "1M", "-e", "1K"});
  EXPECT_TRUE(has(e, "larger than -e")) << e;
  e = error_of({"all_reduce", "-f", "2", "-i", "8"});
  EXPECT_TRUE(has(e, "-f and -i both given")) << e;
  e = error_of({"all_reduce", "-f", "1"});
  EXPECT_TRUE(has(e, "-f 1")) << e;
  e = error_of({"all_reduce", "-d", "float128"});
  EXPECT_TRUE(has(e, "-d float128: unknown type")) << e;
  e = error_of({"all_reduce", "-o", "xor"});
  EXPECT_TRUE(has(e, "-o xor: unknown reduce op")) << e;
  e = error_of({"all_reduce", "-n", "0"});
  EXPECT_TRUE(has(e, "-n 0: must be between 1")) << e;
  e = error_of({"all_reduce", "-n", "abc"});
  EXPECT_TRUE(has(e, "-n abc: expected a whole number")) << e;
  e = error_of({"all_reduce", "-z", "2"});
  EXPECT_TRUE(has(e, "-z 2: expected 0 or 1")) << e;
  e = error_of({"all_reduce", "-a", "9"});
  EXPECT_TRUE(has(e, "-a 9")) << e;
  e = error_of({"all_reduce", "--backend", "ucc"});
  EXPECT_TRUE(has(e, "--backend ucc: use cpu, gloo, nccl, mpi")) << e;
  // Where a backend's buffers may live comes from its row of the table.
  e = error_of({"all_reduce", "--backend", "mpi", "--device", "cuda"});
  EXPECT_TRUE(has(e, "--device cuda: the mpi backend works on host memory; use --backend cpu or nccl")) << e;
  e = error_of({"all_reduce", "--backend", "gloo", "--device", "cuda"});
  EXPECT_TRUE(has(e, "--device cuda: the gloo backend works on host memory; use --backend cpu or nccl")) << e;
  e = error_of({"all_reduce", "--backend", "nccl", "--device", "cpu"});
  EXPECT_TRUE(has(e,
                  "--device cpu: the nccl backend works on GPU memory; use --device cuda, or --backend cpu, "
                  "gloo or mpi"))
      << e;
  e = error_of({"all_reduce", "--transport", "ib"});
  EXPECT_TRUE(has(e, "--transport ib: use auto, shm or tcp")) << e;
  e = error_of({"all_reduce", "--frobnicate"});
  EXPECT_TRUE(has(e, "--frobnicate")) << e;
  e = error_of({"all_reduce", "-g", "0"});
  EXPECT_TRUE(has(e, "-g 0: must be between 1")) << e;
  e = error_of({"all_reduce", "-g", "64", "-t", "64"});
  EXPECT_TRUE(has(e, "at most 1024 ranks")) << e;
  // An unknown flag is named as typed, not CLI11's reversed list.
  e = error_of({"all_reduce", "-q", "1"});
  EXPECT_TRUE(has(e, "not an mci-perf option: -q 1 (")) << e;
  e = error_of({"all_reduce", "-d", "all", "-b", "4"});
  EXPECT_TRUE(has(e, "-b 4 is not a multiple of the 8-byte int64 element")) << e;
  e = error_of({"all_reduce", "-b", "0"});
  EXPECT_TRUE(has(e, "-b 0 with a step factor")) << e;
}

}  // namespace
}  // namespace mci::perf
