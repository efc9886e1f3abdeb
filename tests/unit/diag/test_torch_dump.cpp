#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "diag/torch_dump.hpp"

namespace mci::diag {
namespace {

using Counts = std::vector<std::uint64_t>;

TEST(TorchDump, ShapesAreWhatTorchRecordsForEachKind) {
  // Per rank, for a group of 4 and count 3 (mci's count: the whole buffer,
  // or one rank's share, or one peer's block).
  struct Case {
    OpKind kind;
    bool at_root;
    Counts in, out;
  };
  const Case cases[] = {
      {OpKind::all_reduce, false, {3}, {3}},
      {OpKind::broadcast, false, {3}, {3}},  // torch names the one tensor on every rank
      {OpKind::reduce, false, {3}, {3}},
      {OpKind::all_gather, false, {3}, {12}},
      {OpKind::gather, true, {3}, {12}},
      {OpKind::gather, false, {3}, {}},  // only the root has an output
      {OpKind::scatter, true, {12}, {3}},
      {OpKind::scatter, false, {}, {3}},  // only the root has an input
      {OpKind::reduce_scatter, false, {12}, {3}},
      {OpKind::all_to_all, false, {12}, {12}},
      {OpKind::barrier, false, {}, {}},
      {OpKind::send, false, {3}, {3}},
      {OpKind::recv, false, {3}, {3}},
  };
  for (const Case& c : cases) {
    const TensorShapes s = torch_shapes(c.kind, 3, 4, c.at_root);
    EXPECT_EQ(s.in, c.in) << op_name(c.kind) << (c.at_root ? " at the root" : "");
    EXPECT_EQ(s.out, c.out) << op_name(c.kind) << (c.at_root ? " at the root" : "");
  }
}

TEST(TorchDump, DtypesAndProfilingNamesAreTorchs) {
  EXPECT_EQ(torch_dtype_name(DType::f32), "Float");
  EXPECT_EQ(torch_dtype_name(DType::f64), "Double");
  EXPECT_EQ(torch_dtype_name(DType::f16), "Half");
  EXPECT_EQ(torch_dtype_name(DType::bf16), "BFloat16");
  EXPECT_EQ(torch_dtype_name(DType::i8), "Char");
  EXPECT_EQ(torch_dtype_name(DType::u8), "Byte");
  EXPECT_EQ(torch_dtype_name(DType::i32), "Int");
  EXPECT_EQ(torch_dtype_name(DType::i64), "Long");

  OpRecord r;
  r.kind = OpKind::all_gather;
  EXPECT_EQ(torch_profiling_name(r, 1), "mci:all_gather");
  r.kind = OpKind::send;
  r.root = 2;
  EXPECT_EQ(torch_profiling_name(r, 1), "mci:send 1->2");
  r.kind = OpKind::recv;
  r.root = 0;
  EXPECT_EQ(torch_profiling_name(r, 1), "mci:recv 1<-0");
  r.root = any_source;
  EXPECT_EQ(torch_profiling_name(r, 1), "mci:recv 1<-?");
}

OpRecord record(std::uint64_t id, std::uint64_t seq, OpKind kind, OpState state, std::uint64_t count = 3,
                int root = -1) {
  OpRecord r;
  r.id = id;
  r.seq = seq;
  r.kind = kind;
  r.state = state;
  r.count = count;
  r.root = root;
  r.dtype = DType::f32;
  r.enqueued_ns = static_cast<std::int64_t>(id) * 1000;
  if (state != OpState::enqueued) r.started_ns = r.enqueued_ns + 10;
  if (state == OpState::completed || state == OpState::failed) r.ended_ns = r.enqueued_ns + 2010;
  return r;
}

// What Python's pickle reads back, as the lines `script` prints; "" when
// there is no python3 to ask.
std::string python_reads(const std::string& bytes, const std::string& script) {
  const char* python = "/usr/bin/python3";
  if (!std::filesystem::exists(python)) return {};
  const auto path = std::filesystem::temp_directory_path() / ("mci_torch_dump_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string cmd = std::string(python) + " -c '" + script + "' " + path.string() + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  std::string out;
  std::array<char, 4096> buf{};
  while (p && std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  p.reset();
  std::filesystem::remove(path);
  return out;
}

TEST(TorchDump, PythonReadsTorchsDictWithTorchsNumbering) {
  GroupRecords g;
  g.group.name = "0";
  g.group.desc = "default_pg";
  g.group.rank = 1;
  g.group.size = 3;
  g.group.job_ranks = {4, 5, 6};
  g.group.backend = "cpu";
  g.group.timeout = std::chrono::milliseconds(3000);
  g.pg_id = 0;
  // The ring has dropped ops 1 and 2: a send first, then collective #2.
  g.records = {record(3, 0, OpKind::send, OpState::completed, 3, 2),
               record(4, 2, OpKind::all_gather, OpState::completed),
               record(5, 0, OpKind::recv, OpState::enqueued, 3, any_source),
               record(6, 3, OpKind::all_reduce, OpState::failed)};
  EXPECT_EQ(g.group.job_rank(), 5);
  const std::string bytes = torch_dump({g}, 1'000'000);
  const std::string script =
      "import pickle, sys\n"
      "d = pickle.load(open(sys.argv[1], \"rb\"))\n"
      "print(d[\"version\"], d[\"pg_config\"], d[\"pg_status\"], d[\"comm_lib_version\"])\n"
      "for e in d[\"entries\"]:\n"
      "    print(e[\"record_id\"], e[\"op_id\"], e[\"collective_seq_id\"], e[\"p2p_seq_id\"], e[\"is_p2p\"],\n"
      "          e[\"profiling_name\"], e[\"process_group\"], e[\"state\"], e[\"retired\"], e[\"input_sizes\"],\n"
      "          e[\"input_dtypes\"], e[\"output_sizes\"], e[\"time_created_ns\"], e[\"time_discovered_started_ns\"],\n"
      "          e[\"time_discovered_completed_ns\"], e.get(\"duration_ms\"), e[\"timeout_ms\"], e[\"frames\"])\n";
  const std::string got = python_reads(bytes, script);
  if (got.empty()) GTEST_SKIP() << "no /usr/bin/python3 to read the pickle back";
  EXPECT_EQ(got,
            "2.10 {'0': {'name': '0', 'desc': 'default_pg', 'ranks': '[4, 5, 6]'}} "
            "{'0': {'last_enqueued_collective': 3, 'last_started_collective': 3, 'last_completed_collective': 2}} "
            "mci (cpu)\n"
            // A send's collectives are those before it (#2's seq - 1); its
            // p2p number counts it.
            "2 3 1 2 True mci:send 1->2 ('0', 'default_pg') completed True [[3]] ['Float'] [[3]] 1003000 1003010 "
            "1005010 0.002 3000 []\n"
            "3 4 2 2 False mci:all_gather ('0', 'default_pg') completed True [[3]] ['Float'] [[9]] 1004000 1004010 "
            "1006010 0.002 3000 []\n"
            "4 5 2 3 True mci:recv 1<-? ('0', 'default_pg') scheduled False [[3]] ['Float'] [[3]] 1005000 None "
            "None None 3000 []\n"
            // Failed: started, never completed (a hung one reads the same in torch's dumps).
            "5 6 3 3 False mci:all_reduce ('0', 'default_pg') started True [[3]] ['Float'] [[3]] 1006000 1006010 "
            "None None 3000 []\n");
}

}  // namespace
}  // namespace mci::diag
