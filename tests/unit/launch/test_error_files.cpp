#include <gtest/gtest.h>

#include <filesystem>

#include "launch/output/error_files.hpp"
#include "launch/output/summary.hpp"
#include "support/temp_dir.hpp"

namespace mci::launch {
namespace {

TEST(ErrorFiles, OneFolderPerRankRemovedWithTheJob) {
  std::string dir;
  {
    ErrorFiles files(4, 2);
    dir = files.dir();
    EXPECT_TRUE(std::filesystem::is_directory(dir + "/rank4"));
    EXPECT_TRUE(std::filesystem::is_directory(dir + "/rank5"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/rank3"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ErrorFiles, ReadsWhatTorchsRecordWrites) {
  test::TempDir t;
  // torch.distributed.elastic's ErrorHandler.record_exception format.
  const auto good = t.file("a.json", R"({"message": {"message": "ValueError: boom\nsecond line",
      "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}})");
  EXPECT_EQ(recorded_exception(good), "ValueError: boom\nsecond line");
  EXPECT_EQ(recorded_exception(t.file("b.json", R"({"message": "RuntimeError: old style"})")),
            "RuntimeError: old style");
  EXPECT_EQ(recorded_exception(t.file("c.json", "not json {")), std::nullopt);
  EXPECT_EQ(recorded_exception(t.file("d.json", R"({"other": 1})")), std::nullopt);
  EXPECT_EQ(recorded_exception(t.path() + "/missing.json"), std::nullopt);
}

TEST(ErrorFiles, TheSummaryQuotesTheRecordedException) {
  JobReport r;
  r.host = "h";
  r.ranks.resize(1);
  r.ranks[0].rank = 3;
  r.ranks[0].wait_status = 1 << 8;
  r.ranks[0].python_exception = "ValueError: boom\nmore";
  r.first_failure = 0;
  std::string s;
  for (const auto& l : summary_lines(r)) s += l + "\n";
  EXPECT_NE(s.find("mcirun: rank 3 raised (from its TORCHELASTIC_ERROR_FILE):\nmcirun: | ValueError: boom\n"
                   "mcirun: | more\n"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace mci::launch
