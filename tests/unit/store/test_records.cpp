#include "store/records.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

using namespace mci::records;

namespace {

// The message a decoder throws for `bytes`, or "" when it accepts them.
template <typename Decode>
std::string error_of(Decode decode, const std::string& bytes) {
  try {
    decode(bytes, "store key 'k'");
  } catch (const RecordError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Records, TheFormatIsNetstringsWithAVersionAndAKind) {
  EXPECT_EQ(encode_member({3, "node-a"}), "21:1:1,1:m,1:3,6:node-a,,");
  EXPECT_EQ(encode(Record{'g', {}}), "8:1:1,1:g,,");
}

TEST(Records, HostNamesWithSeparatorsRoundTrip) {
  const std::vector<Member> ms{{0, "a:b@c|d;e,f"}, {7, ""}, {12, "1:x,"}, {3, std::string("nul\0byte", 8)}};
  EXPECT_EQ(decode_members(encode_members(ms), "k"), ms);
  const RankClaim c{"h@o:s|t;", 4242, "0a1b"};
  EXPECT_EQ(decode_rank_claim(encode_rank_claim(c), "k"), c);
  EXPECT_EQ(describe(c), "h@o:s|t;:4242 (0a1b)");
  const NodeCard card{99, 8, "n;1|2"};
  EXPECT_EQ(decode_node_card(encode_node_card(card), "k"), card);
  const NodeNews news{2, 15, "signal at node|2; ranks 4:7"};
  EXPECT_EQ(decode_node_news(encode_node_news(news), "k"), news);
}

// The hang report's request and answer: every field, numbers past 32 bits,
// descriptions with any byte.
TEST(Records, HangReportsRequestAndAnswerRoundTrip) {
  const HangRequest q{7, 1ull << 40};
  EXPECT_EQ(decode_hang_request(encode_hang_request(q), "k"), q);
  const RankState s{1ull << 33,
                    (1ull << 33) + 2,
                    "all_reduce #3 (f32 x 2, sum)",
                    "",
                    "send tag 7 (f32 x 4) to rank 1",
                    0,
                    1ull << 35,
                    0};
  EXPECT_EQ(decode_rank_state(encode_rank_state(s), "k"), s);
  EXPECT_THROW(decode_rank_state(encode_hang_request(q), "k"), RecordError);
}

TEST(Records, ArrivalsMixMembersAndExclusions) {
  const std::string list =
      encode_exclusion(2) + encode_member({0, "h0"}) + encode_exclusion(5) + encode_member({3, "h;3"});
  const Arrivals a = decode_arrivals(list, "k");
  EXPECT_EQ(a.members, (std::vector<Member>{{0, "h0"}, {3, "h;3"}}));
  EXPECT_EQ(a.excluded, (std::set<int>{2, 5}));
  EXPECT_TRUE(decode_arrivals("", "k").members.empty());
  EXPECT_EQ(decode_gone(encode_gone(4) + encode_gone(1), "k"), (std::set<int>{1, 4}));
}

TEST(Records, AGrowDecisionIsTheCountThenTheJoinersListAsStored) {
  const std::string joiners = encode_joiner({"h1", "10-ab"}) + encode_joiner({"h@2", "11-cd"});
  const GrowDecision d = decode_grow_decision(encode_grow_decision(3, joiners), "k");
  EXPECT_EQ(d.members, 3);
  EXPECT_EQ(d.joiners, (std::vector<Joiner>{{"h1", "10-ab"}, {"h@2", "11-cd"}}));
  EXPECT_EQ(decode_joiners(joiners, "k"), d.joiners);
  EXPECT_TRUE(decode_grow_decision(encode_grow_decision(2, ""), "k").joiners.empty());
}

TEST(Records, NodeSlotsKeepTheirOrder) {
  const std::vector<NodeSlot> slots{{0, 4}, {3, 2}, {1, 8}};
  EXPECT_EQ(decode_node_slots(encode_node_slots(slots), "k"), slots);
  EXPECT_TRUE(decode_node_slots("", "k").empty());
}

TEST(Records, BrokenFramingIsNamedWithTheKeyAndTheByte) {
  const auto members = [](std::string_view b, std::string_view w) { return decode_members(b, w); };
  EXPECT_NE(error_of(members, "3@host;").find("store key 'k': at byte 1: expected ':' after the length"),
            std::string::npos)
      << error_of(members, "3@host;");
  EXPECT_NE(error_of(members, "x").find("at byte 0: expected a length"), std::string::npos);
  EXPECT_NE(error_of(members, "99:1:1,").find("a length of 99 with 4 byte(s) left"), std::string::npos);
  EXPECT_NE(error_of(members, "3:abcd").find("expected ',' after the bytes"), std::string::npos);
  EXPECT_NE(error_of(members, "01:a,").find("leading zero"), std::string::npos);
  EXPECT_NE(error_of(members, "1234567890:").find("more than 9 digits"), std::string::npos);
  // Good records, then a torn one: the error points past the good ones.
  const std::string good = encode_member({1, "h"});
  EXPECT_NE(error_of(members, good + "5:").find(fmt::format("at byte {}", good.size() + 2)), std::string::npos)
      << error_of(members, good + "5:");
}

TEST(Records, WrongVersionKindOrFieldsAreNamed) {
  const auto members = [](std::string_view b, std::string_view w) { return decode_members(b, w); };
  EXPECT_NE(error_of(members, "8:1:2,1:m,,").find("format version '2'; this mci reads version 1"), std::string::npos);
  EXPECT_NE(error_of(members, "0:,").find("an empty record"), std::string::npos);
  EXPECT_NE(error_of(members, encode_gone(1)).find("a gone record ('g') where a member record ('m') belongs"),
            std::string::npos);
  EXPECT_NE(error_of(members, encode(Record{'m', {"1"}})).find("with 1 field(s) instead of 2"), std::string::npos);
  EXPECT_NE(error_of(members, encode(Record{'m', {"-1", "h"}})).find("rank is '-1', not a number from 0"),
            std::string::npos);
  EXPECT_NE(error_of(members, encode(Record{'m', {"3x", "h"}})).find("rank is '3x'"), std::string::npos);
  EXPECT_NE(error_of(members, encode(Record{'m', {"99999999999", "h"}})).find("not a number"), std::string::npos);
  const auto claim = [](std::string_view b, std::string_view w) { return decode_rank_claim(b, w); };
  EXPECT_NE(error_of(claim, "").find("0 record(s) where one rank claim record belongs"), std::string::npos);
  EXPECT_NE(error_of(claim, "host:12 (ab)").find("store key 'k'"), std::string::npos);
  const auto card = [](std::string_view b, std::string_view w) { return decode_node_card(b, w); };
  EXPECT_NE(error_of(card, encode(Record{'c', {"0", "1", "h"}})).find("pid is '0', not a number from 1"),
            std::string::npos);
  const auto grow = [](std::string_view b, std::string_view w) { return decode_grow_decision(b, w); };
  EXPECT_NE(error_of(grow, "").find("an empty decision"), std::string::npos);
}

TEST(Records, EveryPrefixOfAValidListIsRejectedOrAShorterList) {
  // What a reader racing a writer could see, were values not written whole.
  const std::string list = encode_member({1, "a:b"}) + encode_member({2, "c"});
  for (std::size_t n = 0; n <= list.size(); ++n) {
    const std::string cut = list.substr(0, n);
    try {
      const auto ms = decode_members(cut, "k");
      EXPECT_TRUE(n == 0 || n == encode_member({1, "a:b"}).size() || n == list.size()) << n;
      EXPECT_LE(ms.size(), 2u);
    } catch (const RecordError&) {
    }
  }
}
