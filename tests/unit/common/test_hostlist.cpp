#include <gtest/gtest.h>

#include "common/hostlist.hpp"
#include "mci/errors.hpp"

namespace mci {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, PlainNamesAndRangesInSlurmOrder) {
  EXPECT_EQ(expand_hostlist("node[01-03,7],gpu5"), (Hosts{"node01", "node02", "node03", "node7", "gpu5"}));
  EXPECT_EQ(expand_hostlist("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand_hostlist("solo"), (Hosts{"solo"}));
  EXPECT_EQ(expand_hostlist(""), Hosts{});
}

TEST(Hostlist, PaddingFollowsTheLowerBoundAndWidensPastIt) {
  EXPECT_EQ(expand_hostlist("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("n[007]"), (Hosts{"n007"}));
}

TEST(Hostlist, SuffixesAndSeveralBracketsMultiply) {
  EXPECT_EQ(expand_hostlist("n[1-2]-ib"), (Hosts{"n1-ib", "n2-ib"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]"), (Hosts{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("x[1,3],r[1-2]n5"), (Hosts{"x1", "x3", "r1n5", "r2n5"}));
}

TEST(Hostlist, FirstHostWithoutExpandingTheRest) {
  EXPECT_EQ(first_host("node[01-03,7],gpu5"), "node01");
  EXPECT_EQ(first_host("gpu5,node[01-03]"), "gpu5");
  EXPECT_EQ(first_host("r[3-4]n[09-10]-ib"), "r3n09-ib");
  // A huge list still gives its first host at once.
  EXPECT_EQ(first_host("n[0000000-9999999]"), "n0000000");
  EXPECT_THROW(first_host(""), ConfigError);
}

TEST(Hostlist, MalformedListsAreRejectedWithTheExpression) {
  for (const char* bad : {"n[1-", "n1-2]", "n[[1]]", "n[3-1]", "n[a-b]", "n[1,,2]", "a,,b", "n[]", "n[-2]"}) {
    try {
      expand_hostlist(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Hostlist, RefusesToExpandPastTheLimit) {
  EXPECT_THROW(expand_hostlist("n[1-100]", 99), ConfigError);
  EXPECT_EQ(expand_hostlist("n[1-100]", 100).size(), 100u);
}

}  // namespace
}  // namespace mci
