// The one classifier of who is where at a collective position
// (monitor/positions.hpp), which the hang report and the page both call.
#include <gtest/gtest.h>

#include "monitor/positions.hpp"

namespace mci::monitor {
namespace {

RankPlace alive(int rank, std::uint64_t entered, std::uint64_t running_seq = 0, std::string running = "",
                std::string at_position = "") {
  RankPlace p;
  p.rank = rank;
  p.entered = entered;
  p.running_seq = running_seq;
  p.running = std::move(running);
  p.at_position = std::move(at_position);
  return p;
}

RankPlace with_life(int rank, Life life, std::uint64_t entered = 0) {
  RankPlace p;
  p.rank = rank;
  p.life = life;
  p.entered = entered;
  return p;
}

TEST(Positions, EachRankIsPlacedAgainstTheCollectiveAtThePosition) {
  const std::vector<RankPlace> places{
      alive(0, 7, 7, "all_reduce"),                // in it
      alive(1, 6),                                 // not there yet
      alive(2, 7, 7, "broadcast"),                 // another collective at #7
      alive(3, 7, 0, "", "all_reduce"),            // went through it
      alive(4, 8, 8, "all_reduce", "all_gather"),  // called all_gather at #7, now further
      with_life(5, Life::lost, 3),                 // gone
      with_life(6, Life::done, 2),                 // ended cleanly: owes nothing
      with_life(7, Life::silent),                  // did not answer
      with_life(8, Life::no_group),                // no group yet
  };
  const Positions at = classify_positions(places, 7, "all_reduce");
  EXPECT_EQ(at.position, 7u);
  EXPECT_EQ(at.where,
            (std::vector<Where>{Where::waiting, Where::never_entered, Where::elsewhere, Where::passed, Where::elsewhere,
                                Where::lost, Where::done, Where::silent, Where::never_entered}));
  EXPECT_EQ(at.missing, (std::vector<int>{1, 2, 4, 5, 8}));
  EXPECT_EQ(at.of(Where::never_entered), (std::vector<int>{1, 8}));
  EXPECT_EQ(at.of(Where::waiting), (std::vector<int>{0}));
}

TEST(Positions, MissingIsInRankOrderWhateverTheOrderGiven) {
  const std::vector<RankPlace> places{alive(3, 1), alive(0, 2, 2, "barrier"), alive(1, 1)};
  EXPECT_EQ(furthest_position(places), 2u);
  EXPECT_EQ(classify_positions(places, 2, "barrier").missing, (std::vector<int>{1, 3}));
}

TEST(Positions, TheFurthestPositionCountsARankThatEndedThere) {
  const std::vector<RankPlace> places{alive(0, 4, 4, "all_reduce"), with_life(1, Life::lost, 5)};
  EXPECT_EQ(furthest_position(places), 5u);
  EXPECT_EQ(furthest_position(std::vector<RankPlace>{}), 0u);
}

}  // namespace
}  // namespace mci::monitor
