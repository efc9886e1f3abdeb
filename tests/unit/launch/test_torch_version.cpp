#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "launch/config/torch_version.hpp"
#include "launch/ranks/signals.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

using namespace std::chrono_literals;

TEST(TorchVersion, ParsesTorchsVersionStrings) {
  auto v = parse_torch_version("2.15.0+cu132");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->major, 2);
  EXPECT_EQ(v->minor, 15);
  EXPECT_FALSE(v->reads_old_nccl_names());
  v = parse_torch_version("1.13.0a0");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->reads_old_nccl_names());
  EXPECT_TRUE(parse_torch_version("2.1.2")->reads_old_nccl_names());
  EXPECT_FALSE(parse_torch_version("2.2.0")->reads_old_nccl_names()) << "2.2 renamed it TORCH_NCCL_...";
  for (const char* bad : {"", "2", "x.y", "2.15 junk", "Traceback"}) EXPECT_FALSE(parse_torch_version(bad)) << bad;
}

TEST(TorchVersion, AskedOfTheInterpreterWithinItsLimit) {
  SignalFd signals;
  test::TempDir d;
  // A stand-in for python: what it prints is the version.
  const std::string old = d.file("py-old", "#!/bin/sh\necho 1.13.0a0\n", 0755);
  TorchProbe p = probe_torch(old, {}, signals);
  ASSERT_TRUE(p.version);
  EXPECT_EQ(p.version->text, "1.13.0a0");
  EXPECT_FALSE(p.timed_out);
  EXPECT_FALSE(probe_torch(d.file("py-none", "#!/bin/sh\n", 0755), {}, signals).version) << "no torch";
  EXPECT_FALSE(probe_torch(d.file("py-fails", "#!/bin/sh\necho 2.15.0; exit 1\n", 0755), {}, signals).version);
  EXPECT_FALSE(probe_torch(d.path() + "/missing", {}, signals).version);
  // One that never answers is killed at the limit, with what it started.
  const std::string pidfile = d.path() + "/pid";
  const std::string slow = d.file("py-slow", "#!/bin/sh\nsleep 30 & echo $! > " + pidfile + "; wait\n", 0755);
  const auto start = std::chrono::steady_clock::now();
  p = probe_torch(slow, {}, signals, 300ms);
  EXPECT_TRUE(p.timed_out);
  EXPECT_FALSE(p.version);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  std::ifstream in(pidfile);
  pid_t sleeper = 0;
  in >> sleeper;
  ASSERT_GT(sleeper, 0);
  // SIGKILL lands a moment after kill() returns: dead means gone or a zombie.
  auto dead = [sleeper] {
    std::ifstream stat("/proc/" + std::to_string(sleeper) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto rp = text.rfind(')');
    return text.empty() || (rp != std::string::npos && rp + 2 < text.size() && text[rp + 2] == 'Z');
  };
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!dead() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(dead()) << "its process group was killed";
  signals.take();
}

TEST(TorchVersion, FindsDebiansTorchWithoutImportingIt) {
  if (!std::filesystem::exists("/usr/lib/python3/dist-packages/torch/version.py")) {
    GTEST_SKIP() << "no Debian python3-torch here";
  }
  SignalFd signals;
  const auto start = std::chrono::steady_clock::now();
  TorchProbe p = probe_torch("/usr/bin/python3", {"PATH=/usr/bin:/bin"}, signals);
  ASSERT_TRUE(p.version);
  EXPECT_EQ(p.version->major, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "importing torch would take longer";
  signals.take();
}

}  // namespace
}  // namespace mci::launch
