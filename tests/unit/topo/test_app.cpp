// mci-topo's command line, and `check --perf` on mci-perf's real JSON.
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <cstdio>

#include "mci/errors.hpp"
#include "topo/app.hpp"
#include "topo/nccl_xml.hpp"
#include "topo/perf_check.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

struct Outcome {
  int code;
  std::string out, err;
};

Outcome topo(std::vector<std::string> args) {
  args.insert(args.begin(), "mci-topo");
  std::ostringstream out, err;
  const int code = topo_main(args, out, err);
  return {code, out.str(), err.str()};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mci-topo-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST(App, MatrixFromNcclXml) {
  const Outcome r = topo({"-m", "--nccl-xml", fixture("nccl/pcie-2socket-4gpu.xml")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU0\t X \tPIX\tSYS\tSYS\tPIX\t0-15\t0\t\tN/A\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Advice:"), std::string::npos);  // -m is the matrix alone
}

TEST(App, P2pSpelledLikeNvidiaSmi) {
  const Outcome r = topo({"-p2p", "r", "--nccl-xml", fixture("nccl/pcie-2socket-4gpu.xml")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" GPU0\tX\tOK\tU\tU\t\n"), std::string::npos) << r.out;
  const Outcome bad = topo({"-p2p", "q", "--nccl-xml", fixture("nccl/pcie-2socket-4gpu.xml")});
  EXPECT_EQ(bad.code, 2);
}

TEST(App, ErrorsNameTheInputAndExitTwo) {
  const Outcome r = topo({"--nccl-xml", "/nonexistent/dump.xml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/dump.xml"), std::string::npos) << r.err;
  const Outcome both = topo({"--nccl-xml", "a", "--hwloc-xml", "b"});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--help"), std::string::npos);
}

TEST(App, ExportIsAcceptedBack) {
  const std::string out = temp_path("export.xml");
  const Outcome r = topo({"--nccl-xml", fixture("nccl/nvswitch-8gpu.xml"), "--export-nccl-xml", out});
  EXPECT_EQ(r.code, 0) << r.err;
  const Outcome again = topo({"-m", "--nccl-xml", out});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("GPU7\tNV18\tNV18"), std::string::npos) << again.out;
  std::filesystem::remove(out);
}

TEST(App, LiveRunOnThisMachine) {
  // Whatever this machine holds, mci-topo answers and says why when it sees no GPU.
  const Outcome r = topo({"--nvml-library", "/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("CPU Affinity"), std::string::npos) << r.out;
  const Outcome j = topo({"--format", "json", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(j.code, 0);
  EXPECT_NE(j.out.find("\"kind\": \"cpu\""), std::string::npos) << j.out;
}

// A result written by mci-perf itself, on this machine's CPU.
TEST(CheckPerf, ReadsMciPerfJson) {
  const std::string json = temp_path("perf.json");
  const std::string cmd = std::string(MCI_TEST_BIN_DIR) + "/mci-perf all_reduce -b 64K -e 256K -f 2 -n 2 -w 1 --json " +
                          json + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Outcome without = topo({"check", "--perf", json, "--nccl-xml", fixture("nccl/pcie-2socket-4gpu.xml")});
  EXPECT_EQ(without.code, 0) << without.err;
  EXPECT_NE(without.out.find("all_reduce on the cpu backend, 1 ranks"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("--ceiling"), std::string::npos) << without.out;
  {
    // bench_ceilings is named as the user can run it: by name (PATH finds
    // it, or it is not beside this program), or by its real path beside
    // this program; never a relative build path.
    const auto at = without.out.find(" --benchmark_filter=Memcpy");
    ASSERT_NE(at, std::string::npos) << without.out;
    const auto line = without.out.rfind('\n', at) + 1;
    const std::string named = without.out.substr(line, at - line);
    EXPECT_TRUE(named == "bench_ceilings" || (named.front() == '/' && std::filesystem::exists(named))) << named;
  }
  const Outcome with =
      topo({"check", "--perf", json, "--ceiling", "10", "--nccl-xml", fixture("nccl/pcie-2socket-4gpu.xml")});
  EXPECT_NE(with.out.find("Line rate: 10.00 GB/s"), std::string::npos) << with.out;
  std::filesystem::remove(json);
}

std::string perf_json(const std::string& backend, const std::vector<std::string>& devices, double busbw) {
  std::string d;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    d += (i ? "," : "") + std::string("{\"rank\":") + std::to_string(i) + ",\"pid\":1,\"host\":\"h\",\"device\":\"" +
         devices[i] + "\"}";
  }
  return "{\"tool\":\"mci-perf\",\"collective\":\"all_reduce\",\"backend\":\"" + backend +
         "\",\"ranks\":" + std::to_string(devices.size()) + ",\"devices\":[" + d +
         "],\"results\":[{\"size\":1,\"out_of_place\":{\"busbw_GBps\":" + std::to_string(busbw) +
         "},\"in_place\":null}],\"peak_busbw_GBps\":0}";
}

TEST(CheckPerf, FractionOfTheRingBottleneck) {
  const Topology pcie = read_nccl_xml_file(fixture("nccl/pcie-2socket-4gpu.xml"));
  const PerfCheck c = check_perf(pcie, perf_json("nccl", {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}, 11), "r.json", {});
  EXPECT_DOUBLE_EQ(c.line_GBps, 22.0);
  ASSERT_TRUE(c.fraction);
  EXPECT_DOUBLE_EQ(*c.fraction, 0.5);
  EXPECT_DOUBLE_EQ(c.guide, 0.6);
  EXPECT_NE(c.text.find("Below the guide"), std::string::npos) << c.text;
  // Two GPUs on one switch: the ring stays below it.
  const PerfCheck two = check_perf(pcie, perf_json("nccl", {"cuda:0", "cuda:1"}, 50), "r.json", {});
  EXPECT_NEAR(two.line_GBps, 63.0, 0.05);

  const Topology nvs = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu.xml"));
  const PerfCheck nv = check_perf(nvs, perf_json("nccl", {"cuda:0", "cuda:1"}, 480), "r.json", {});
  EXPECT_DOUBLE_EQ(nv.guide, 0.8);
  EXPECT_NE(nv.text.find("NVLS"), std::string::npos) << nv.text;
}

// The cpu backend stages CUDA buffers through host memory: its ceiling is
// the memory copy, not the GPUs' ring, as mci-perf's "device_links" says.
TEST(CheckPerf, AHostBackendOnGpuBuffersIsComparedWithHostMemory) {
  const Topology nvs = read_nccl_xml_file(fixture("nccl/nvswitch-8gpu.xml"));
  std::string staged = perf_json("cpu", {"cuda:0", "cuda:1"}, 5);
  staged.insert(1, "\"device_links\":false,");
  const PerfCheck host = check_perf(nvs, staged, "r.json", 12.0);
  EXPECT_DOUBLE_EQ(host.line_GBps, 12.0);
  EXPECT_NE(host.ceiling_from.find("--ceiling"), std::string::npos) << host.text;
  std::string linked = perf_json("gloo-like", {"cuda:0", "cuda:1"}, 480);
  linked.insert(1, "\"device_links\":true,");
  const PerfCheck ring = check_perf(nvs, linked, "r.json", 12.0);
  EXPECT_GT(ring.line_GBps, 12.0);
}

TEST(CheckPerf, RefusesOtherJson) {
  const Topology t = read_nccl_xml_file(fixture("nccl/gpu-nic-switch.xml"));
  EXPECT_THROW(check_perf(t, "{\"tool\":\"nccl-tests\"}", "x.json", {}), ConfigError);
  EXPECT_THROW(check_perf(t, "not json", "x.json", {}), ConfigError);
}

// mcirun --bind core, end to end: each rank starts on CPUs of its own.
TEST(McirunBind, CoreGivesEachRankItsOwnCpus) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "needs 2 CPUs";
  const std::string cmd =
      std::string(MCI_TEST_BIN_DIR) +
      "/mcirun --standalone --bind core --nproc_per_node=2 --prefix /bin/grep Cpus_allowed_list /proc/self/status "
      "2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("--bind core: rank 0 (local 0) on CPUs"), std::string::npos) << out;
  std::vector<std::string> lists;
  for (const char* rank : {"[rank 0] Cpus_allowed_list:\t", "[rank 1] Cpus_allowed_list:\t"}) {
    const auto at = out.find(rank);
    ASSERT_NE(at, std::string::npos) << out;
    const auto begin = at + std::string(rank).size();
    lists.push_back(out.substr(begin, out.find('\n', begin) - begin));
  }
  EXPECT_NE(lists[0], lists[1]) << out;
  EXPECT_EQ(lists[0].find(','), std::string::npos);
}

}  // namespace
}  // namespace mci::topo
