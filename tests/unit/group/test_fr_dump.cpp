// The flight recorder in torch's format, from a group: where it goes, on
// demand, on a signal, and the settings' checks. tests/python/torch_frtrace.py
// runs torch's torchfrtrace on a real job's files.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "../../support/ports.hpp"
#include "mci/mci.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A folder of its own, removed after.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mci_fr_dump_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

InitOptions world_of_one(std::map<std::string, std::string> settings) {
  // The tests choose their destinations: none from the environment.
  ::unsetenv("MCI_FR_DUMP_DIR");
  ::unsetenv("TORCH_FR_DUMP_TEMP_FILE");
  ::unsetenv("MCI_FR_DUMP_ON_SIGNAL");
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  o.rank = 0;
  o.world_size = 1;
  o.timeout = 5000ms;
  o.settings = std::move(settings);
  return o;
}

TEST(FrDump, OnDemandToTheDumpDirOrAGivenPrefix) {
  TempDir dir;
  auto pg = init_process_group(world_of_one({{"MCI_FR_DUMP_DIR", dir.path.string()}}));
  std::vector<float> v{1, 2};
  pg->all_reduce(view(v));
  pg->barrier();
  pg->name_for_dumps("trainer", "dp_group", {7});
  const std::string path = pg->dump_flight_recorder();
  // Named by the rank in the job the group was told about.
  EXPECT_EQ(path, (dir.path / "mci_trace_rank_7").string());
  const std::string bytes = read(path);
  ASSERT_GE(bytes.size(), 3u);
  EXPECT_EQ(bytes.substr(0, 2), std::string("\x80\x02", 2));  // a protocol-2 pickle
  EXPECT_EQ(bytes.back(), '.');
  for (const char* piece : {"2.10", "trainer", "dp_group", "[7]", "mci:all_reduce", "mci:barrier", "completed"}) {
    EXPECT_NE(bytes.find(piece), std::string::npos) << piece;
  }
  // A prefix given wins; its folder is made.
  const std::string other = pg->dump_flight_recorder((dir.path / "sub" / "x_").string());
  EXPECT_EQ(other, (dir.path / "sub" / "x_7").string());
  EXPECT_TRUE(fs::exists(other));
}

TEST(FrDump, TorchsVariableIsTheFallbackAndMcisWins) {
  TempDir dir;
  InitOptions o = world_of_one({});
  ::setenv("TORCH_FR_DUMP_TEMP_FILE", (dir.path / "torch_trace_").c_str(), 1);
  auto pg = init_process_group(o);
  EXPECT_EQ(pg->dump_flight_recorder(), (dir.path / "torch_trace_0").string());
  pg.reset();
  o.init_method = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  o.settings = {{"MCI_FR_DUMP_DIR", (dir.path / "mci").string()}};
  pg = init_process_group(o);
  EXPECT_EQ(pg->dump_flight_recorder(), (dir.path / "mci" / "mci_trace_rank_0").string());
  ::unsetenv("TORCH_FR_DUMP_TEMP_FILE");
}

TEST(FrDump, NoDestinationIsAConfigError) {
  auto pg = init_process_group(world_of_one({}));
  try {
    pg->dump_flight_recorder();
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MCI_FR_DUMP_DIR"), std::string::npos) << e.what();
  }
}

TEST(FrDump, ASignalWithNowhereToWriteIsRefusedAtInit) {
  InitOptions o = world_of_one({{"MCI_FR_DUMP_ON_SIGNAL", "SIGUSR2"}});
  o.init_method = "tcp://127.0.0.1:1";  // nothing listens: init must fail before trying
  o.world_size = 2;
  try {
    init_process_group(o);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("MCI_FR_DUMP_ON_SIGNAL=SIGUSR2 needs a place"), std::string::npos) << m;
  }
  o.settings = {{"MCI_FR_DUMP_ON_SIGNAL", "SIGHUP"}};
  try {
    init_process_group(o);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MCI_FR_DUMP_ON_SIGNAL"), std::string::npos) << e.what();
  }
}

std::atomic<int> g_program_handler_calls{0};

TEST(FrDump, TheSignalWritesTheFileAndTheProgramsHandlerStillRuns) {
  TempDir dir;
  // The program's own handler, there before mci's: still called after it.
  struct sigaction mine {};
  mine.sa_handler = [](int) { g_program_handler_calls.fetch_add(1); };
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &mine, nullptr), 0);
  auto pg =
      init_process_group(world_of_one({{"MCI_FR_DUMP_DIR", dir.path.string()}, {"MCI_FR_DUMP_ON_SIGNAL", "SIGUSR1"}}));
  std::vector<float> v{1, 2};
  pg->all_reduce(view(v));
  const fs::path file = dir.path / "mci_trace_rank_0";
  ASSERT_FALSE(fs::exists(file));
  ASSERT_EQ(::raise(SIGUSR1), 0);
  EXPECT_EQ(g_program_handler_calls.load(), 1);
  // Written by mci's thread: wait for it, bounded.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!fs::exists(file) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(file));
  EXPECT_NE(read(file).find("mci:all_reduce"), std::string::npos);
}

}  // namespace
}  // namespace mci
