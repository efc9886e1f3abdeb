// The records mci's processes agree through in the store: who arrived at a
// shrink and what was decided, who waits to join and what the group took,
// an elastic node's card and the nodes of an attempt, a rank's claim, one
// node's news for the others. One format for all (docs/architecture.md,
// "Wire formats"):
//
//   record = LEN ":" field field ... ","   (a netstring of fields)
//   field  = LEN ":" BYTES ","             (a netstring)
//
// LEN is the decimal length of what follows the colon, up to the comma
// (no sign, no leading zero). A record's first field is the format's
// version ("1"), its second its kind (one letter), then its fields. A list
// is records one after another, so appending one record to a store key
// keeps the key a list. Any byte may stand in a field: a host name with
// ':', '@', '|' or ';' is one field like any other.
//
// Decoders read every byte: a record of another version, kind or number of
// fields, a number that is not one, or bytes after the last record throw
// RecordError, whose text names the key (or what the caller calls the
// value), the byte where reading stopped and what was wrong there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mci/errors.hpp"

namespace mci::records {

// The version every record of this build carries and the only one it reads:
// the processes of a job run one mci.
inline constexpr std::string_view kVersion = "1";

class RecordError : public Error {
 public:
  using Error::Error;
};

// One decoded record: its kind and its fields after the kind.
struct Record {
  char kind = 0;
  std::vector<std::string> fields;

  bool operator==(const Record&) const = default;
};

// The format itself, for the typed records below and the fuzz target.
std::string encode(const Record& r);
// Every record of `bytes`; `what` names the value in errors ("store key
// 'gone'").
std::vector<Record> decode_list(std::string_view bytes, std::string_view what);

// --- shrink (group/shrink.cpp) ---------------------------------------------

// A rank and the host it runs on: an arrival, and a rank the decision keeps.
struct Member {
  int rank = 0;
  std::string host;

  bool operator==(const Member&) const = default;
};

std::string encode_member(const Member& m);
// A rank some survivor excludes, appended to the arrivals before its own.
std::string encode_exclusion(int rank);
// A rank whose process's store connection ended (the certificate the store
// appends for it, group/init.cpp).
std::string encode_gone(int rank);

struct Arrivals {
  std::vector<Member> members;  // in the order they arrived
  std::set<int> excluded;
};
Arrivals decode_arrivals(std::string_view bytes, std::string_view what);
std::string encode_members(const std::vector<Member>& ms);
std::vector<Member> decode_members(std::string_view bytes, std::string_view what);
std::set<int> decode_gone(std::string_view bytes, std::string_view what);

// --- grow (group/grow.cpp) --------------------------------------------------

// A process waiting to join: its host, and what tells it from every other
// process (pid and a nonce).
struct Joiner {
  std::string host;
  std::string id;

  bool operator==(const Joiner&) const = default;
};
std::string encode_joiner(const Joiner& j);
std::vector<Joiner> decode_joiners(std::string_view bytes, std::string_view what);

// The members' count, then the joiners taken, in their new ranks' order.
struct GrowDecision {
  int members = 0;
  std::vector<Joiner> joiners;
};
// `joiners` is the joiners' list as the store holds it (records already).
std::string encode_grow_decision(int members, std::string_view joiners);
GrowDecision decode_grow_decision(std::string_view bytes, std::string_view what);

// --- elastic rendezvous (launch/nodes/elastic_rendezvous.cpp) ---------------------

// What node 0 needs of another node's mcirun.
struct NodeCard {
  pid_t pid = 0;
  int nproc = 1;
  std::string host;

  bool operator==(const NodeCard&) const = default;
};
std::string encode_node_card(const NodeCard& c);
NodeCard decode_node_card(std::string_view bytes, std::string_view what);

// A node of an attempt, in GROUP_RANK order.
struct NodeSlot {
  int id = 0;
  int nproc = 1;

  bool operator==(const NodeSlot&) const = default;
};
std::string encode_node_slots(const std::vector<NodeSlot>& nodes);
std::vector<NodeSlot> decode_node_slots(std::string_view bytes, std::string_view what);

// --- rank claim (group/init.cpp, read by diag/hang_report.cpp) --------------

// The process that holds a rank; the nonce tells two groups of one process
// apart.
struct RankClaim {
  std::string host;
  pid_t pid = 0;
  std::string nonce;

  bool operator==(const RankClaim&) const = default;
};
std::string encode_rank_claim(const RankClaim& c);
RankClaim decode_rank_claim(std::string_view bytes, std::string_view what);
// "host:pid (nonce)", for messages.
std::string describe(const RankClaim& c);

// --- node news (launch/nodes/node_link.cpp) ---------------------------------------

// What one node tells the others: its processes failed (signal 0, `text`
// says how), or it was told to stop (the signal, `text` says where).
struct NodeNews {
  int node = 0;
  int signal = 0;
  std::string text;

  bool operator==(const NodeNews&) const = default;
};
std::string encode_node_news(const NodeNews& n);
NodeNews decode_node_news(std::string_view bytes, std::string_view what);

// --- hang report (diag/hang_report.cpp) --------------------------------------

// A rank asking every rank where it is, about the collective at `seq`.
struct HangRequest {
  int rank = 0;
  std::uint64_t seq = 0;

  bool operator==(const HangRequest&) const = default;
};
std::string encode_hang_request(const HangRequest& q);
HangRequest decode_hang_request(std::string_view bytes, std::string_view what);

// Where a rank is, as its flight recorder says (its answer to a request).
struct RankState {
  std::uint64_t entered = 0;      // the newest collective it entered
  std::uint64_t queued = 0;       // the newest collective it queued (async work not started yet)
  std::string last_completed;     // its newest completed operation, described ("none")
  std::string at_seq;             // what it called at the asked position, if it did ("" otherwise)
  std::string running;            // the operation it is in, described ("" when in its own code)
  std::uint64_t running_seq = 0;  // that operation's position (0: point-to-point, or none)
  std::uint64_t running_ms = 0;   // how long it has been in it
  std::uint64_t idle_ms = 0;      // how long it has been in its own code, when in no operation

  bool operator==(const RankState&) const = default;
};
std::string encode_rank_state(const RankState& s);
RankState decode_rank_state(std::string_view bytes, std::string_view what);

}  // namespace mci::records
