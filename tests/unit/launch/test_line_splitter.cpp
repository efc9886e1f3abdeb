#include <gtest/gtest.h>

#include "launch/output/line_splitter.hpp"

namespace mci::launch {
namespace {

using Lines = std::vector<std::string>;

struct Collect {
  Lines lines;
  void operator()(std::string_view l) { lines.emplace_back(l); }
};

TEST(LineSplitter, CompleteLinesComeOutAtOnce) {
  LineSplitter s;
  Collect c;
  s.feed("a\nbb\n\nccc\n", std::ref(c));
  EXPECT_EQ(c.lines, (Lines{"a", "bb", "", "ccc"}));
  EXPECT_EQ(s.pending(), 0u);
}

TEST(LineSplitter, PartialLinesWaitForTheirNewline) {
  LineSplitter s;
  Collect c;
  s.feed("hel", std::ref(c));
  EXPECT_TRUE(c.lines.empty());
  s.feed("lo wor", std::ref(c));
  EXPECT_TRUE(c.lines.empty());
  s.feed("ld\nnext", std::ref(c));
  EXPECT_EQ(c.lines, (Lines{"hello world"}));
  EXPECT_EQ(s.pending(), 4u);
  s.finish(std::ref(c));  // end of stream: the last line without newline
  EXPECT_EQ(c.lines, (Lines{"hello world", "next"}));
  s.finish(std::ref(c));  // nothing twice
  EXPECT_EQ(c.lines.size(), 2u);
}

TEST(LineSplitter, AnyChunkingGivesTheSameLines) {
  std::string text;
  Lines expect;
  for (int i = 0; i < 300; ++i) {
    expect.push_back(std::string(static_cast<std::size_t>(i * 37 % 501), static_cast<char>('a' + i % 26)));
    text += expect.back() + "\n";
  }
  for (std::size_t chunk : {1u, 2u, 7u, 4096u, 65536u}) {
    LineSplitter s;
    Collect c;
    for (std::size_t off = 0; off < text.size(); off += chunk) {
      s.feed(std::string_view(text).substr(off, chunk), std::ref(c));
    }
    s.finish(std::ref(c));
    EXPECT_EQ(c.lines, expect) << "chunk " << chunk;
  }
}

TEST(LineSplitter, EndlessLineIsPassedOnInPiecesOfTheLimit) {
  LineSplitter s(8);
  Collect c;
  s.feed("0123456789abcdefXYZ", std::ref(c));
  EXPECT_EQ(c.lines, (Lines{"01234567", "89abcdef"}));
  s.feed("\n", std::ref(c));
  EXPECT_EQ(c.lines.back(), "XYZ");
  c.lines.clear();
  s.feed("exactly8\nlonger_than_8\n", std::ref(c));  // a line of the limit stays whole
  EXPECT_EQ(c.lines, (Lines{"exactly8", "longer_t", "han_8"}));
}

TEST(LineTail, KeepsTheLastLinesShortened) {
  LineTail t(3, 5);
  for (const char* l : {"one", "two", "three", "four", "a very long line"}) t.add(l);
  EXPECT_EQ(t.lines(), (Lines{"three", "four", "a ver [...]"}));
  LineTail none(0);
  none.add("x");
  EXPECT_TRUE(none.lines().empty());
}

}  // namespace
}  // namespace mci::launch
