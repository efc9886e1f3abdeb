#include <gtest/gtest.h>

#include <cstdlib>

#include "common/env.hpp"
#include "mci/errors.hpp"

namespace mci {
namespace {

TEST(ParseInt, AcceptsWholeNumbersOnly) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int(" -3 "), -3);
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int("4x"));
  EXPECT_FALSE(parse_int("x"));
  EXPECT_FALSE(parse_int("1.5"));
  EXPECT_FALSE(parse_int("99999999999999999999999"));
}

TEST(EnvInt, MissingVariableNamesItAndTheMethod) {
  try {
    throw_env_missing("MCI_TEST_MISSING", "env://");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("environment variable MCI_TEST_MISSING expected, but not set"), std::string::npos) << m;
    EXPECT_NE(m.find("env://"), std::string::npos) << m;
  }
}

TEST(EnvInt, NonNumericValueIsReportedWithItsValue) {
  ::setenv("MCI_TEST_BAD", "two", 1);
  try {
    env_int("MCI_TEST_BAD", "env://");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("MCI_TEST_BAD is 'two'"), std::string::npos) << m;
  }
  ::setenv("MCI_TEST_BAD", "7", 1);
  EXPECT_EQ(env_int("MCI_TEST_BAD", "env://"), 7);
  ::unsetenv("MCI_TEST_BAD");
}

}  // namespace
}  // namespace mci
