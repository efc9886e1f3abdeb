// Deciding once through the store: the one agreement a shrink, a grow and
// the elastic rendezvous each make (docs/architecture.md, "Wire formats").
//
// An agreement lives under a base key:
//   BASE/arrived   the arrivals: records (store/records.hpp) appended one
//                  after another, so the key stays a list whoever appends
//   BASE/count     how many arrivals are listed (a counter), counted after
//                  the append: a count of k means k arrivals listed, so a
//                  participant can poll one number instead of the list
//   BASE/decision  the decision: records, fixed by one compare_set; the
//                  first participant to decide wins, and every participant
//                  (the deciders that lost included) reads that one value
// Every wait is bounded: what runs out throws a TimeoutError naming what
// was waited for, who arrived, who of those expected did not, and what to
// do. A decision whose bytes are not records throws RecordError naming its
// key: no participant acts on a value it cannot read.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/records.hpp"

namespace mci {

class DecideOnce {
 public:
  // What an agreement is: its keys, and the words of its messages.
  struct Terms {
    std::string base;  // the keys' base (above)
    // What the decision is, for messages: "the shrink decision of a group of 4".
    std::string decision;
    // What to do when a wait for it runs out.
    std::string remedy;
    // The participant an arrival record stands for ("rank 3 (host-a)"), or
    // "" for a record that stands for nobody (a shrink's exclusion). Unset:
    // "an arrival of kind K".
    std::function<std::string(const records::Record&)> who;
  };

  // What `settle` asks each round: a decision to fix, or nullopt to wait.
  // `last` is true once the deadline has passed: a proposal then is the
  // last chance to decide before the wait throws.
  using Propose = std::function<std::optional<std::string>(bool last)>;

  // `store` outlives this object (it is a view of one agreement on it).
  DecideOnce(Store& store, Terms terms);

  std::string arrived_key() const { return terms_.base + "/arrived"; }
  std::string count_key() const { return terms_.base + "/count"; }
  std::string decision_key() const { return terms_.base + "/decision"; }

  // Appends this participant's records (one or more, encoded) to the
  // arrivals, then counts them in; returns the count after.
  std::int64_t arrive(std::string_view records);
  // How many arrivals are listed at least: one small request.
  std::int64_t count();
  // The arrivals as listed now (framing checked: RecordError names the key).
  std::string arrivals();

  // Fixes `decision` (records, not empty) unless one is fixed already;
  // returns the decision that holds: this one, or the one fixed first.
  std::string decide(std::string_view decision);
  // The decision if one is fixed within `wait` (0: look without waiting).
  std::optional<std::string> decision(std::chrono::milliseconds wait);
  // The decision, waiting until `dl`; past it, throws timed_out(dl, expected).
  std::string await(const Deadline& dl, const std::vector<std::string>& expected = {});
  // Until a decision is fixed: each round, `propose` may give one (this
  // participant fixes it, unless another did first), else the decision is
  // waited for up to `slice`. After the round that `propose` saw as the
  // last, throws timed_out(dl, expected).
  std::string settle(const Deadline& dl, std::chrono::milliseconds slice, const Propose& propose,
                     const std::vector<std::string>& expected = {});

  // "arrived: A, B; missing: C" (of `expected`, by the names `who` gives).
  std::string roll_call(const std::vector<std::string>& expected = {});
  // The error of a wait for the decision that ran out at `dl`.
  TimeoutError timed_out(const Deadline& dl, const std::vector<std::string>& expected = {});

 private:
  std::string key_text(const std::string& key) const { return "store key '" + key + "'"; }
  std::string checked_decision(std::string bytes) const;

  Store& store_;
  Terms terms_;
};

}  // namespace mci
