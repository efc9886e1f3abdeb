#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "diag/pickle_writer.hpp"

namespace mci::diag {
namespace {

std::string hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string pickled(const std::function<void(PickleWriter&)>& write) {
  PickleWriter w;
  write(w);
  return hex(w.finish());
}

// Every expected value below is Python 3's own
// pickletools.optimize(pickle.dumps(x, 2)) (the memo stripped), as hex.

TEST(PickleWriter, ScalarsAreWhatPythonWrites) {
  EXPECT_EQ(pickled([](PickleWriter& w) { w.none(); }), "80024e2e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.boolean(true); }), "8002882e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.boolean(false); }), "8002892e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.real(1.5); }), "8002473ff80000000000002e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.real(-0.0); }), "80024780000000000000002e");
}

TEST(PickleWriter, IntegersTakePythonsFormForEachRange) {
  const std::pair<std::int64_t, const char*> cases[] = {
      {0, "80024b002e"},
      {255, "80024bff2e"},
      {256, "80024d00012e"},
      {65535, "80024dffff2e"},
      {65536, "80024a000001002e"},
      {-1, "80024affffffff2e"},
      {2147483647, "80024affffff7f2e"},
      {-2147483648LL, "80024a000000802e"},
      {2147483648LL, "80028a0500000080002e"},
      {-2147483649LL, "80028a05ffffff7fff2e"},
      {INT64_MAX, "80028a08ffffffffffffff7f2e"},
      {INT64_MIN, "80028a0800000000000000802e"},
      {1724779239936775119LL, "80028a08cf53669894a5ef172e"},  // a wall-clock time in ns
  };
  for (const auto& [v, want] : cases) {
    EXPECT_EQ(pickled([v = v](PickleWriter& w) { w.integer(v); }), want) << v;
  }
}

TEST(PickleWriter, StringsAreUtf8AndBadBytesBecomeQuestionMarks) {
  EXPECT_EQ(pickled([](PickleWriter& w) { w.str(""); }), "800258000000002e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.str("abc"); }), "800258030000006162632e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.str("\xc3\xa9"); }), "80025802000000c3a92e");
  // pickle.load decodes strictly: one stray byte would make the file unreadable.
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.str(
                  "a\xff"
                  "b");
            }),
            "80025803000000613f622e");
  EXPECT_EQ(pickled([](PickleWriter& w) { w.str("\xc0\xaf"); }), "800258020000003f3f2e");  // overlong '/'
}

TEST(PickleWriter, ContainersTakePythonsFormForEachLength) {
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_list();
              w.end();
            }),
            "80025d2e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_list();
              w.integer(1);
              w.end();
            }),
            "80025d4b01612e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_list();
              w.integer(1);
              w.integer(2);
              w.end();
            }),
            "80025d284b014b02652e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_tuple();
              w.end();
            }),
            "8002292e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_tuple();
              w.integer(1);
              w.end();
            }),
            "80024b01852e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_tuple();
              for (int i = 1; i <= 3; ++i) w.integer(i);
              w.end();
            }),
            "80024b014b024b03872e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_tuple();
              for (int i = 1; i <= 4; ++i) w.integer(i);
              w.end();
            }),
            "8002284b014b024b034b04742e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_dict();
              w.end();
            }),
            "80027d2e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_dict();
              w.str("a");
              w.integer(1);
              w.end();
            }),
            "80027d5801000000614b01732e");
  EXPECT_EQ(pickled([](PickleWriter& w) {
              w.begin_dict();
              w.str("a");
              w.integer(1);
              w.str("b");
              w.begin_list();
              w.integer(2);
              w.end();
              w.end();
            }),
            "80027d285801000000614b015801000000625d4b0261752e");
}

TEST(PickleWriter, NestedLikeTorchsDump) {
  // {'version': '2.10', 'entries': [{'process_group': ('0', 'default_pg'), 'input_sizes': [[3]]}]}
  const std::string got = pickled([](PickleWriter& w) {
    w.begin_dict();
    w.str("version");
    w.str("2.10");
    w.str("entries");
    w.begin_list();
    w.begin_dict();
    w.str("process_group");
    w.begin_tuple();
    w.str("0");
    w.str("default_pg");
    w.end();
    w.str("input_sizes");
    w.begin_list();
    w.begin_list();
    w.integer(3);
    w.end();
    w.end();
    w.end();
    w.end();
    w.end();
  });
  EXPECT_EQ(got,
            "80027d28580700000076657273696f6e5804000000322e3130580700"
            "0000656e74726965735d7d28580d00000070726f636573735f67726f"
            "7570580100000030580a00000064656661756c745f706786580b0000"
            "00696e7075745f73697a65735d5d4b0361617561752e");
}

TEST(PickleWriter, MisuseIsALogicError) {
  {
    PickleWriter w;
    EXPECT_THROW(w.end(), std::logic_error);
  }
  {
    PickleWriter w;
    w.begin_list();
    EXPECT_THROW(w.finish(), std::logic_error);
  }
  {
    PickleWriter w;
    w.begin_dict();
    w.str("key");
    EXPECT_THROW(w.end(), std::logic_error);
  }
  {
    PickleWriter w;
    EXPECT_THROW(w.finish(), std::logic_error);  // nothing written
  }
  {
    PickleWriter w;
    w.none();
    w.none();
    EXPECT_THROW(w.finish(), std::logic_error);  // two values
  }
}

}  // namespace
}  // namespace mci::diag
