#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/program_name.hpp"

namespace mci {
namespace {

namespace fs = std::filesystem;

// Two folders standing for an installed prefix's bin/ and another one on PATH.
class ProgramName : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mci-progname-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    fs::create_directories(root_ / "prefix" / "bin");
    fs::create_directories(root_ / "other");
    self_ = program(root_ / "prefix" / "bin" / "mci-topo");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  static std::string program(const fs::path& p) {
    std::ofstream(p) << "#!/bin/sh\n";
    ::chmod(p.c_str(), 0755);
    return p.string();
  }
  std::string bin() const { return (root_ / "prefix" / "bin").string(); }
  std::string other() const { return (root_ / "other").string(); }

  fs::path root_;
  std::string self_;
};

TEST_F(ProgramName, ByNameWhenPathFindsTheOneBesideUs) {
  program(root_ / "prefix" / "bin" / "bench_ceilings");
  EXPECT_EQ(program_to_run("bench_ceilings", self_, fixed_env({{"PATH", other() + ":" + bin()}})), "bench_ceilings");
}

TEST_F(ProgramName, ByItsPathBesideUsWhenPathFindsNoneOrAnother) {
  const std::string ours = program(root_ / "prefix" / "bin" / "bench_ceilings");
  EXPECT_EQ(program_to_run("bench_ceilings", self_, fixed_env({{"PATH", other()}})), ours);
  program(root_ / "other" / "bench_ceilings");  // another build's, first on PATH
  EXPECT_EQ(program_to_run("bench_ceilings", self_, fixed_env({{"PATH", other() + ":" + bin()}})), ours);
}

TEST_F(ProgramName, ByNameWhenNotBesideUs) {
  EXPECT_EQ(program_to_run("bench_ceilings", self_, fixed_env({{"PATH", other()}})), "bench_ceilings");
  program(root_ / "other" / "bench_ceilings");
  EXPECT_EQ(program_to_run("bench_ceilings", self_, fixed_env({{"PATH", other()}})), "bench_ceilings");
  EXPECT_EQ(program_to_run("bench_ceilings", "", fixed_env({})), "bench_ceilings");
}

}  // namespace
}  // namespace mci
