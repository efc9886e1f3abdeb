#include <gtest/gtest.h>

#include "common/fingerprint.hpp"

namespace mci {
namespace {

Fingerprint fp(OpKind k, std::uint64_t seq, std::uint64_t count, DType t = DType::f32, int root = -1) {
  Fingerprint f;
  f.kind = k;
  f.seq = seq;
  f.count = count;
  f.dtype = t;
  f.root = root;
  return f;
}

TEST(Fingerprint, EqualCollectivesMatchAndAnyDifferenceDoesNot) {
  EXPECT_TRUE(fp(OpKind::all_reduce, 3, 10).matches(fp(OpKind::all_reduce, 3, 10)));
  EXPECT_FALSE(fp(OpKind::all_reduce, 3, 10).matches(fp(OpKind::broadcast, 3, 10)));
  EXPECT_FALSE(fp(OpKind::all_reduce, 3, 10).matches(fp(OpKind::all_reduce, 3, 11)));
  EXPECT_FALSE(fp(OpKind::all_reduce, 3, 10).matches(fp(OpKind::all_reduce, 3, 10, DType::f64)));
  EXPECT_FALSE(fp(OpKind::broadcast, 3, 10, DType::f32, 0).matches(fp(OpKind::broadcast, 3, 10, DType::f32, 1)));
  auto a = fp(OpKind::all_reduce, 1, 4), b = a;
  b.op = ReduceOp::max;
  EXPECT_FALSE(a.matches(b));
  b = a;
  b.algo = 2;
  EXPECT_FALSE(a.matches(b));
}

TEST(Fingerprint, DescribeNamesOpSequenceShapeAndRoot) {
  EXPECT_EQ(fp(OpKind::all_reduce, 1, 2).describe(), "all_reduce #1 (f32 x 2, sum)");
  EXPECT_EQ(fp(OpKind::broadcast, 4, 8, DType::i64, 1).describe(), "broadcast #4 (i64 x 8, root 1)");
  EXPECT_EQ(fp(OpKind::send, 7, 3).describe(), "send tag 7 (f32 x 3)");
  // A recv carries its send's fingerprint, and says it is a recv.
  EXPECT_EQ(fp(OpKind::send, 7, 3).describe_receive(), "recv tag 7 (f32 x 3)");
  EXPECT_EQ(fp(OpKind::barrier, 2, 0).describe(), "barrier #2");
}

}  // namespace
}  // namespace mci
