#include "diag/pickle_writer.hpp"

#include <bit>
#include <stdexcept>

namespace mci::diag {

namespace {

// Protocol 2's opcodes (Python's Lib/pickle.py names them).
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kBinUnicode = 'X';
constexpr char kMark = '(';
constexpr char kEmptyList = ']';
constexpr char kAppend = 'a';
constexpr char kAppends = 'e';
constexpr char kEmptyTuple = ')';
constexpr char kTuple = 't';
constexpr char kTuple1 = '\x85';
constexpr char kEmptyDict = '}';
constexpr char kSetItem = 's';
constexpr char kSetItems = 'u';

// Length of the valid UTF-8 sequence at s[i], or 0: pickle.load decodes
// strings strictly, so one bad byte (a group name from anywhere) would make
// the whole dump unreadable.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b < 0x80) return 1;
  if ((b & 0xe0) == 0xc0) {
    n = 2;
    cp = b & 0x1f;
  } else if ((b & 0xf0) == 0xe0) {
    n = 3;
    cp = b & 0x0f;
  } else if ((b & 0xf8) == 0xf0) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid too.
  constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

PickleWriter::PickleWriter() {
  put(kProto);
  put('\x02');
}

void PickleWriter::put_le(std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PickleWriter::value_written() {
  if (finished_) throw std::logic_error("PickleWriter: a value after finish()");
  if (open_.empty()) {
    ++top_values_;
  } else {
    ++open_.back().values;
  }
}

void PickleWriter::none() {
  value_written();
  put(kNone);
}

void PickleWriter::boolean(bool v) {
  value_written();
  put(v ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(std::int64_t v) {
  value_written();
  // Python's own choice for each range, so small values cost 2 or 3 bytes.
  if (v >= 0 && v <= 0xff) {
    put(kBinInt1);
    put_le(static_cast<std::uint64_t>(v), 1);
  } else if (v >= 0 && v <= 0xffff) {
    put(kBinInt2);
    put_le(static_cast<std::uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    put(kBinInt);
    put_le(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
  } else {
    // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
    const auto u = static_cast<std::uint64_t>(v);
    int n = 8;
    while (n > 1) {
      const auto top = static_cast<unsigned char>((u >> (8 * (n - 1))) & 0xff);
      const bool next_negative = ((u >> (8 * (n - 2))) & 0x80) != 0;
      if ((top == 0x00 && !next_negative) || (top == 0xff && next_negative)) {
        --n;
      } else {
        break;
      }
    }
    put(kLong1);
    out_.push_back(static_cast<char>(n));
    put_le(u, n);
  }
}

void PickleWriter::real(double v) {
  value_written();
  put(kBinFloat);
  const auto bits = std::bit_cast<std::uint64_t>(v);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big-endian
}

void PickleWriter::str(std::string_view utf8) {
  value_written();
  std::string clean;
  clean.reserve(utf8.size());
  for (std::size_t i = 0; i < utf8.size();) {
    if (const std::size_t n = utf8_sequence(utf8, i)) {
      clean.append(utf8.substr(i, n));
      i += n;
    } else {
      clean.push_back('?');
      ++i;
    }
  }
  put(kBinUnicode);
  put_le(clean.size(), 4);
  out_ += clean;
}

void PickleWriter::open(Kind kind, char empty_op) {
  value_written();
  if (empty_op != 0) put(empty_op);
  open_.push_back(Open{kind, out_.size()});
  put(kMark);
}

void PickleWriter::begin_list() { open(Kind::list, kEmptyList); }
void PickleWriter::begin_tuple() { open(Kind::tuple, 0); }
void PickleWriter::begin_dict() { open(Kind::dict, kEmptyDict); }

// Each container ends in Python's own form for its length, so the bytes
// equal pickletools.optimize(pickle.dumps(x, 2)) and tests compare them
// exactly: the MARK written at its start is dropped again when it holds
// zero or one item (a tuple of one to three), which only moves the few
// bytes of that item.
void PickleWriter::end() {
  if (open_.empty()) throw std::logic_error("PickleWriter: end() with no container open");
  const Open o = open_.back();
  open_.pop_back();
  if (o.kind == Kind::dict && o.values % 2 != 0) throw std::logic_error("PickleWriter: a dict key without its value");
  const std::size_t items = o.kind == Kind::dict ? o.values / 2 : o.values;
  switch (o.kind) {
    case Kind::list:
    case Kind::dict:
      if (items <= 1) out_.erase(o.mark, 1);
      if (items == 1) put(o.kind == Kind::list ? kAppend : kSetItem);
      if (items > 1) put(o.kind == Kind::list ? kAppends : kSetItems);
      break;
    case Kind::tuple:
      if (items == 0) {
        out_[o.mark] = kEmptyTuple;
      } else if (items <= 3) {
        out_.erase(o.mark, 1);
        put(static_cast<char>(kTuple1 + static_cast<char>(items - 1)));
      } else {
        put(kTuple);
      }
      break;
  }
}

std::string PickleWriter::finish() {
  if (!open_.empty()) throw std::logic_error("PickleWriter: finish() with a container still open");
  if (finished_) throw std::logic_error("PickleWriter: finish() twice");
  if (top_values_ != 1) throw std::logic_error("PickleWriter: a pickle holds exactly one value");
  finished_ = true;
  put(kStop);
  return std::move(out_);
}

}  // namespace mci::diag
