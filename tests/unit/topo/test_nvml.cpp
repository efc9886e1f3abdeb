// NVML through the fake library the tests build (tests/support/fake_nvml.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "topo/live_import.hpp"
#include "topo/nvml_import.hpp"
#include "topo/paths.hpp"
#include "topo/render.hpp"
#include "unit/topo/topo_fixtures.hpp"

namespace mci::topo {
namespace {

using testing::fixture;

Topology live_with(const char* machine) {
  ::setenv("FAKE_NVML_MACHINE", machine, 1);
  LiveSources s;
  s.sys_root = fixture("sysfs-2socket-3gpu");
  s.proc_root = fixture("proc-bare-metal");
  s.nvml_library = MCI_FAKE_NVML;
  return read_live(s);
}

TEST(Nvml, LibraryPathFromTheEnvironment) {
  ::setenv("MCI_NVML_LIBRARY", "/opt/x/libnvidia-ml.so.1", 1);
  EXPECT_EQ(nvml_library_path(""), "/opt/x/libnvidia-ml.so.1");
  EXPECT_EQ(nvml_library_path("/given.so"), "/given.so");
  ::unsetenv("MCI_NVML_LIBRARY");
  EXPECT_EQ(nvml_library_path(""), "libnvidia-ml.so.1");
}

TEST(Nvml, Nv18PairAndSys) {
  const Topology t = live_with("nv18");
  const std::vector<int> g = t.gpus();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(t.at(g[0]).label, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.at(g[0]).sm, 90);
  const Path nv = classify(t, g[0], g[1]);
  EXPECT_EQ(nv.smi, "NV18");
  EXPECT_DOUBLE_EQ(nv.GBps, 450.0);
  EXPECT_EQ(classify(t, g[0], g[2]).smi, "SYS");
  EXPECT_EQ(t.reported_p2p.at({g[0], g[1]}), "OK");
  EXPECT_EQ(t.reported_p2p.at({g[0], g[2]}), "CNS");
  EXPECT_NE(t.source.find("NVML"), std::string::npos);
  // NVML's own P2P answer replaces the guess.
  const std::string p2p = p2p_text(t, 'r');
  EXPECT_NE(p2p.find(" GPU0\tX\tOK\tCNS\t"), std::string::npos) << p2p;
  EXPECT_EQ(p2p.find("Without NVML"), std::string::npos);
}

TEST(Nvml, NvSwitchMachine) {
  const Topology t = live_with("nvswitch");
  const std::vector<int> g = t.gpus();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(classify(t, g[0], g[2]).smi, "NV18");
  EXPECT_EQ(classify(t, g[0], g[2]).hops, 2);
}

TEST(Nvml, GpuOutsideThePciTreeIsKeptAndNoted) {
  const Topology t = live_with("stray");
  ASSERT_EQ(t.gpus().size(), 4u);
  const int stray = t.gpus()[3];
  EXPECT_EQ(t.at(stray).busid, "0000:c1:00.0");
  EXPECT_EQ(t.at(t.at(stray).parent).numa, 1);            // from its CPU affinity
  EXPECT_EQ(classify(t, t.gpus()[0], stray).smi, "SYS");  // NVML's level
  ASSERT_FALSE(t.notes.empty());
  EXPECT_NE(t.notes.back().find("not in the PCI tree"), std::string::npos);
}

TEST(Nvml, DriverNotLoadedIsNoGpuWithTheReason) {
  Topology t;
  ::setenv("FAKE_NVML_MACHINE", "no_driver", 1);
  EXPECT_FALSE(add_nvml(t, MCI_FAKE_NVML));
  EXPECT_NE(t.no_gpu_reason.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos) << t.no_gpu_reason;
  // The PCI tree still shows the GPUs; the reason becomes a note.
  const Topology live = live_with("no_driver");
  EXPECT_EQ(live.gpus().size(), 3u);
  EXPECT_TRUE(live.no_gpu_reason.empty());
  ASSERT_FALSE(live.notes.empty());
  EXPECT_NE(live.notes.back().find("PCI tree alone"), std::string::npos);
}

TEST(Nvml, NoGpusAndNoLibrary) {
  Topology t;
  ::setenv("FAKE_NVML_MACHINE", "no_gpus", 1);
  EXPECT_FALSE(add_nvml(t, MCI_FAKE_NVML));
  EXPECT_NE(t.no_gpu_reason.find("lists no GPU"), std::string::npos) << t.no_gpu_reason;
  Topology missing;
  EXPECT_FALSE(add_nvml(missing, "/nonexistent/libnvidia-ml.so.1"));
  EXPECT_NE(missing.no_gpu_reason.find("no NVIDIA driver is installed"), std::string::npos);
  EXPECT_NE(missing.no_gpu_reason.find("MCI_NVML_LIBRARY"), std::string::npos);
}

}  // namespace
}  // namespace mci::topo
