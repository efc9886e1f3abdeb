#include "store/records.hpp"

#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace mci::records {

namespace {

// A length has at most this many digits: more than any store value holds.
constexpr std::size_t kMaxLengthDigits = 9;

// The kinds, one letter each.
constexpr char kMember = 'm';
constexpr char kExclusion = 'x';
constexpr char kGone = 'g';
constexpr char kJoiner = 'j';
constexpr char kGroupSize = 's';
constexpr char kNodeCard = 'c';
constexpr char kNodeSlot = 'e';
constexpr char kRankClaim = 'r';
constexpr char kNodeNews = 'f';
constexpr char kHangRequest = 'q';
constexpr char kRankState = 'w';  // where a rank is

void put(std::string& out, std::string_view bytes) {
  out += std::to_string(bytes.size());
  out += ':';
  out += bytes;
  out += ',';
}

// Reads netstrings from a view, naming where it stopped on an error.
class Reader {
 public:
  Reader(std::string_view bytes, std::string_view what, std::size_t base = 0)
      : bytes_(bytes), what_(what), base_(base) {}

  bool done() const { return at_ == bytes_.size(); }
  std::size_t offset() const { return base_ + at_; }

  std::string_view next() {
    std::size_t digits = 0;
    while (at_ + digits < bytes_.size() && bytes_[at_ + digits] >= '0' && bytes_[at_ + digits] <= '9') ++digits;
    if (digits == 0) fail("expected a length (decimal digits)");
    if (digits > kMaxLengthDigits) fail(fmt::format("a length of more than {} digits", kMaxLengthDigits));
    if (digits > 1 && bytes_[at_] == '0') fail("a length with a leading zero");
    std::size_t len = 0;
    std::from_chars(bytes_.data() + at_, bytes_.data() + at_ + digits, len);
    const std::size_t colon = at_ + digits;
    if (colon >= bytes_.size() || bytes_[colon] != ':') {
      at_ = colon;
      fail("expected ':' after the length");
    }
    if (len > bytes_.size() - colon - 1) {
      at_ = colon + 1;
      fail(fmt::format("a length of {} with {} byte(s) left", len, bytes_.size() - colon - 1));
    }
    const std::size_t comma = colon + 1 + len;
    if (comma >= bytes_.size() || bytes_[comma] != ',') {
      at_ = comma;
      fail("expected ',' after the bytes its length counts");
    }
    const std::string_view out = bytes_.substr(colon + 1, len);
    at_ = comma + 1;
    return out;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw RecordError(
        fmt::format("{}: at byte {}: {} (mci's store records, format version {}: is another "
                    "program, or another mci version, writing this job's store?)",
                    what_, base_ + at_, why, kVersion));
  }

 private:
  std::string_view bytes_;
  std::string_view what_;
  std::size_t base_;
  std::size_t at_ = 0;
};

const char* kind_name(char kind) {
  switch (kind) {
    case kMember: return "member";
    case kExclusion: return "exclusion";
    case kGone: return "gone";
    case kJoiner: return "joiner";
    case kGroupSize: return "group size";
    case kNodeCard: return "node card";
    case kNodeSlot: return "node slot";
    case kRankClaim: return "rank claim";
    case kNodeNews: return "node news";
    case kHangRequest: return "hang request";
    case kRankState: return "rank state";
    default: return "unknown";
  }
}

[[noreturn]] void bad(std::string_view what, std::size_t index, const std::string& why) {
  throw RecordError(fmt::format("{}: record {}: {}", what, index, why));
}

// Checks a record's kind and number of fields.
void expect(const Record& r, char kind, std::size_t fields, std::string_view what, std::size_t index) {
  if (r.kind != kind) {
    bad(what, index,
        fmt::format("a {} record ('{}') where a {} record ('{}') belongs", kind_name(r.kind), r.kind, kind_name(kind),
                    kind));
  }
  if (r.fields.size() != fields) {
    bad(what, index,
        fmt::format("a {} record with {} field(s) instead of {}", kind_name(kind), r.fields.size(), fields));
  }
}

// A field that holds a number from `low` up.
long long number(const Record& r, std::size_t field, const char* name, long long low, std::string_view what,
                 std::size_t index) {
  const std::string& s = r.fields[field];
  long long v = 0;
  // Digits only, no leading zero: one spelling per number.
  const bool digits = !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos &&
                      (s.size() == 1 || s[0] != '0');
  if (digits) std::from_chars(s.data(), s.data() + s.size(), v);
  if (!digits || v < low || v > std::numeric_limits<int>::max()) {
    bad(what, index,
        fmt::format("the {} record's {} is '{}', not a number from {} to {}", kind_name(r.kind), name, s, low,
                    std::numeric_limits<int>::max()));
  }
  return v;
}

// A field that holds a count or a position: any 64-bit unsigned number
// (sequence numbers and milliseconds outgrow an int in a long job).
std::uint64_t number64(const Record& r, std::size_t field, const char* name, std::string_view what, std::size_t index) {
  const std::string& s = r.fields[field];
  std::uint64_t v = 0;
  const bool digits = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos &&
                      (s.size() == 1 || s[0] != '0');
  const auto [end, ec] = digits ? std::from_chars(s.data(), s.data() + s.size(), v)
                                : std::from_chars_result{s.data(), std::errc::invalid_argument};
  if (!digits || ec != std::errc{} || end != s.data() + s.size()) {
    bad(what, index,
        fmt::format("the {} record's {} is '{}', not a number from 0 to {}", kind_name(r.kind), name, s,
                    std::numeric_limits<std::uint64_t>::max()));
  }
  return v;
}

int rank_of(const Record& r, std::string_view what, std::size_t index) {
  return static_cast<int>(number(r, 0, "rank", 0, what, index));
}

std::vector<Record> only(char kind, std::size_t fields, std::string_view bytes, std::string_view what) {
  std::vector<Record> rs = decode_list(bytes, what);
  for (std::size_t i = 0; i < rs.size(); ++i) expect(rs[i], kind, fields, what, i);
  return rs;
}

Record one(char kind, std::size_t fields, std::string_view bytes, std::string_view what) {
  std::vector<Record> rs = decode_list(bytes, what);
  if (rs.size() != 1) bad(what, 0, fmt::format("{} record(s) where one {} record belongs", rs.size(), kind_name(kind)));
  expect(rs[0], kind, fields, what, 0);
  return std::move(rs[0]);
}

}  // namespace

std::string encode(const Record& r) {
  std::string body;
  put(body, kVersion);
  put(body, std::string_view(&r.kind, 1));
  for (const auto& f : r.fields) put(body, f);
  std::string out;
  put(out, body);
  return out;
}

std::vector<Record> decode_list(std::string_view bytes, std::string_view what) {
  std::vector<Record> out;
  Reader list(bytes, what);
  while (!list.done()) {
    const std::size_t start = list.offset();
    const std::string_view body = list.next();
    // The body starts after "LEN:".
    Reader fields(body, what, start + std::to_string(body.size()).size() + 1);
    if (fields.done()) fields.fail("an empty record (no version)");
    if (const std::string_view v = fields.next(); v != kVersion) {
      fields.fail(fmt::format("a record of format version '{}'; this mci reads version {}", v, kVersion));
    }
    if (fields.done()) fields.fail("a record without a kind");
    const std::string_view kind = fields.next();
    if (kind.size() != 1) fields.fail(fmt::format("a kind of {} bytes (one letter)", kind.size()));
    Record r;
    r.kind = kind[0];
    while (!fields.done()) r.fields.emplace_back(fields.next());
    out.push_back(std::move(r));
  }
  return out;
}

std::string encode_member(const Member& m) { return encode({kMember, {std::to_string(m.rank), m.host}}); }
std::string encode_exclusion(int rank) { return encode({kExclusion, {std::to_string(rank)}}); }
std::string encode_gone(int rank) { return encode({kGone, {std::to_string(rank)}}); }

Arrivals decode_arrivals(std::string_view bytes, std::string_view what) {
  Arrivals out;
  const std::vector<Record> rs = decode_list(bytes, what);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].kind == kExclusion) {
      expect(rs[i], kExclusion, 1, what, i);
      out.excluded.insert(rank_of(rs[i], what, i));
    } else {
      expect(rs[i], kMember, 2, what, i);
      out.members.push_back({rank_of(rs[i], what, i), rs[i].fields[1]});
    }
  }
  return out;
}

std::string encode_members(const std::vector<Member>& ms) {
  std::string out;
  for (const auto& m : ms) out += encode_member(m);
  return out;
}

std::vector<Member> decode_members(std::string_view bytes, std::string_view what) {
  std::vector<Member> out;
  const std::vector<Record> rs = only(kMember, 2, bytes, what);
  for (std::size_t i = 0; i < rs.size(); ++i) out.push_back({rank_of(rs[i], what, i), rs[i].fields[1]});
  return out;
}

std::set<int> decode_gone(std::string_view bytes, std::string_view what) {
  std::set<int> out;
  const std::vector<Record> rs = only(kGone, 1, bytes, what);
  for (std::size_t i = 0; i < rs.size(); ++i) out.insert(rank_of(rs[i], what, i));
  return out;
}

std::string encode_joiner(const Joiner& j) { return encode({kJoiner, {j.host, j.id}}); }

std::vector<Joiner> decode_joiners(std::string_view bytes, std::string_view what) {
  std::vector<Joiner> out;
  for (auto& r : only(kJoiner, 2, bytes, what)) out.push_back({std::move(r.fields[0]), std::move(r.fields[1])});
  return out;
}

std::string encode_grow_decision(int members, std::string_view joiners) {
  return encode({kGroupSize, {std::to_string(members)}}) + std::string(joiners);
}

GrowDecision decode_grow_decision(std::string_view bytes, std::string_view what) {
  const std::vector<Record> rs = decode_list(bytes, what);
  if (rs.empty()) bad(what, 0, "an empty decision (it starts with the members' count)");
  expect(rs[0], kGroupSize, 1, what, 0);
  GrowDecision d;
  d.members = static_cast<int>(number(rs[0], 0, "count", 1, what, 0));
  for (std::size_t i = 1; i < rs.size(); ++i) {
    expect(rs[i], kJoiner, 2, what, i);
    d.joiners.push_back({rs[i].fields[0], rs[i].fields[1]});
  }
  return d;
}

std::string encode_node_card(const NodeCard& c) {
  return encode({kNodeCard, {std::to_string(c.pid), std::to_string(c.nproc), c.host}});
}

NodeCard decode_node_card(std::string_view bytes, std::string_view what) {
  const Record r = one(kNodeCard, 3, bytes, what);
  return {static_cast<pid_t>(number(r, 0, "pid", 1, what, 0)), static_cast<int>(number(r, 1, "nproc", 1, what, 0)),
          r.fields[2]};
}

std::string encode_node_slots(const std::vector<NodeSlot>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += encode({kNodeSlot, {std::to_string(n.id), std::to_string(n.nproc)}});
  return out;
}

std::vector<NodeSlot> decode_node_slots(std::string_view bytes, std::string_view what) {
  std::vector<NodeSlot> out;
  const std::vector<Record> rs = only(kNodeSlot, 2, bytes, what);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    out.push_back({static_cast<int>(number(rs[i], 0, "id", 0, what, i)),
                   static_cast<int>(number(rs[i], 1, "nproc", 1, what, i))});
  }
  return out;
}

std::string encode_rank_claim(const RankClaim& c) {
  return encode({kRankClaim, {c.host, std::to_string(c.pid), c.nonce}});
}

RankClaim decode_rank_claim(std::string_view bytes, std::string_view what) {
  Record r = one(kRankClaim, 3, bytes, what);
  return {std::move(r.fields[0]), static_cast<pid_t>(number(r, 1, "pid", 1, what, 0)), std::move(r.fields[2])};
}

std::string describe(const RankClaim& c) { return fmt::format("{}:{} ({})", c.host, c.pid, c.nonce); }

std::string encode_node_news(const NodeNews& n) {
  return encode({kNodeNews, {std::to_string(n.node), std::to_string(n.signal), n.text}});
}

NodeNews decode_node_news(std::string_view bytes, std::string_view what) {
  Record r = one(kNodeNews, 3, bytes, what);
  return {static_cast<int>(number(r, 0, "node", 0, what, 0)), static_cast<int>(number(r, 1, "signal", 0, what, 0)),
          std::move(r.fields[2])};
}

std::string encode_hang_request(const HangRequest& q) {
  return encode({kHangRequest, {std::to_string(q.rank), std::to_string(q.seq)}});
}

HangRequest decode_hang_request(std::string_view bytes, std::string_view what) {
  Record r = one(kHangRequest, 2, bytes, what);
  return {rank_of(r, what, 0), number64(r, 1, "position", what, 0)};
}

std::string encode_rank_state(const RankState& s) {
  return encode({kRankState,
                 {std::to_string(s.entered), std::to_string(s.queued), s.last_completed, s.at_seq, s.running,
                  std::to_string(s.running_seq), std::to_string(s.running_ms), std::to_string(s.idle_ms)}});
}

RankState decode_rank_state(std::string_view bytes, std::string_view what) {
  Record r = one(kRankState, 8, bytes, what);
  RankState s;
  s.entered = number64(r, 0, "entered", what, 0);
  s.queued = number64(r, 1, "queued", what, 0);
  s.last_completed = std::move(r.fields[2]);
  s.at_seq = std::move(r.fields[3]);
  s.running = std::move(r.fields[4]);
  s.running_seq = number64(r, 5, "running position", what, 0);
  s.running_ms = number64(r, 6, "running time", what, 0);
  s.idle_ms = number64(r, 7, "idle time", what, 0);
  return s;
}

}  // namespace mci::records
