#include <gtest/gtest.h>

#include "group/validate.hpp"
#include "mci/errors.hpp"

namespace mci {
namespace {

std::string why(OpKind k, BufferView in, BufferView out, int root = 0, int rank = 0, int size = 2,
                ReduceOp op = ReduceOp::sum) {
  try {
    // The last argument is the root, or the peer of a send or recv.
    const bool p2p = k == OpKind::send || k == OpKind::recv;
    make_desc(Call{.kind = k, .in = in, .out = out, .op = op, .root = p2p ? -1 : root, .peer = p2p ? root : -1}, rank,
              size);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Validate, CountsMustFitTheCollective) {
  std::vector<float> a(4), b(6), c(8);
  EXPECT_NE(why(OpKind::all_reduce, view(a), view(b)).find("out has 6 elements but must have 4"), std::string::npos);
  EXPECT_NE(why(OpKind::all_gather, view(a), view(b)).find("in.count x the group has 2 ranks"), std::string::npos);
  EXPECT_EQ(why(OpKind::all_gather, view(a), view(c)), "");
  EXPECT_NE(why(OpKind::reduce_scatter, view(b), view(a)).find("in has 6 elements but must have 8"), std::string::npos);
  EXPECT_NE(why(OpKind::all_to_all, BufferView{b.data(), 5, DType::f32}, BufferView{c.data(), 5, DType::f32})
                .find("not a multiple of the 2 ranks"),
            std::string::npos);
  // gather's out only matters at the root.
  EXPECT_EQ(why(OpKind::gather, view(a), BufferView{}, 1, 0), "");
  EXPECT_NE(why(OpKind::gather, view(a), BufferView{}, 0, 0).find("out has 0 elements"), std::string::npos);
}

TEST(Validate, RootsPeersTagsAndTypes) {
  std::vector<float> a(4), b(4);
  std::vector<int> i(4);
  EXPECT_NE(why(OpKind::broadcast, view(a), view(a), 2).find("root 2 is out of range: the group has ranks 0..1"),
            std::string::npos);
  EXPECT_NE(why(OpKind::reduce, view(a), view(a), -1).find("root -1 is out of range"), std::string::npos);
  EXPECT_NE(why(OpKind::send, view(a), {}, 0, 0).find("cannot send to itself"), std::string::npos);
  EXPECT_NE(why(OpKind::recv, {}, view(a), 5, 0).find("source rank 5 is out of range"), std::string::npos);
  EXPECT_NE(why(OpKind::all_reduce, view(a), view(i)).find("in is f32 but out is i32"), std::string::npos);
  EXPECT_NE(why(OpKind::all_reduce, BufferView{nullptr, 3, DType::f32}, BufferView{nullptr, 3, DType::f32})
                .find("null data pointer"),
            std::string::npos);
  EXPECT_NE(why(OpKind::all_reduce, view(a), view(b), 0, 0, 2, static_cast<ReduceOp>(9)).find("unknown reduce op"),
            std::string::npos);
}

TEST(Validate, AnySourceIsARecvsOnly) {
  std::vector<float> a(4);
  EXPECT_EQ(why(OpKind::recv, {}, view(a), any_source, 0, 3), "");
  EXPECT_EQ(make_desc(Call{.kind = OpKind::recv, .out = view(a), .peer = any_source, .tag = 7}, 0, 3).peer, any_source);
  EXPECT_TRUE(make_desc(Call{.kind = OpKind::recv, .out = view(a), .peer = any_source}, 0, 3).from_any_source());
  EXPECT_FALSE(make_desc(Call{.kind = OpKind::recv, .out = view(a), .peer = 1}, 0, 3).from_any_source());
  // Any other negative source is refused as before, and says what -1 is.
  EXPECT_NE(why(OpKind::recv, {}, view(a), -2, 0, 3)
                .find("source rank -2 is out of range: the group has ranks 0..2 (or mci::any_source, -1, for "
                      "whichever rank sends first)"),
            std::string::npos);
  EXPECT_NE(why(OpKind::send, view(a), {}, any_source, 0, 3).find("any_source, which only a recv takes"),
            std::string::npos);
  EXPECT_NE(why(OpKind::send, view(a), {}, -2, 0, 3).find("destination rank -2 is out of range"), std::string::npos);
  EXPECT_NE(why(OpKind::recv, {}, view(a), any_source, 0, 1).find("no other rank can send to it"), std::string::npos);
}

TEST(Validate, OverlappingBuffersOnlyInTheInPlaceLayouts) {
  std::vector<float> big(8);
  BufferView all{big.data(), 8, DType::f32};
  EXPECT_NE(why(OpKind::all_reduce, BufferView{big.data(), 4, DType::f32}, BufferView{big.data() + 2, 4, DType::f32})
                .find("overlap"),
            std::string::npos);
  // all_gather in place: in is this rank's slice of out.
  EXPECT_EQ(why(OpKind::all_gather, BufferView{big.data() + 4, 4, DType::f32}, all, 0, 1), "");
  EXPECT_NE(why(OpKind::all_gather, BufferView{big.data() + 4, 4, DType::f32}, all, 0, 0).find("overlap"),
            std::string::npos);
  EXPECT_EQ(why(OpKind::reduce_scatter, all, BufferView{big.data() + 4, 4, DType::f32}, 0, 1), "");
  EXPECT_EQ(why(OpKind::all_reduce, all, all), "");
}

TEST(Validate, DescriptorCountsArePerRank) {
  std::vector<float> a(3), b(9);
  EXPECT_EQ(make_desc(Call{.kind = OpKind::all_gather, .in = view(a), .out = view(b), .root = -1}, 0, 3).count, 3u);
  EXPECT_EQ(make_desc(Call{.kind = OpKind::reduce_scatter, .in = view(b), .out = view(a), .root = -1}, 0, 3).count, 3u);
  EXPECT_EQ(make_desc(Call{.kind = OpKind::all_to_all, .in = view(b), .out = view(b), .root = -1}, 0, 3).count, 3u);
  EXPECT_EQ(make_desc(Call{.kind = OpKind::scatter, .in = view(b), .out = view(a), .root = 0}, 0, 3).count, 3u);
  EXPECT_EQ(make_desc(Call{.kind = OpKind::scatter, .in = BufferView{}, .out = view(a), .root = 0}, 1, 3).count, 3u);
}

}  // namespace
}  // namespace mci
