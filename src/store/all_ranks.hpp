// "Publish mine, read everyone's, fail together": the rendezvous steps where
// every rank of a group must reach the same verdict. Each rank publishes its
// value, or the error that stops it, under `topic/RANK`, then reads every
// rank's. A rank that fails tells the others before it stops, so nobody
// waits for it until the timeout.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/deadline.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"

namespace mci {

struct Verdict {
  bool ok = true;
  std::string text;        // the value, or the error
  bool timed_out = false;  // an error that was a timeout (a peer silent): shrink() tries again without it
  static Verdict value(std::string v) { return {true, std::move(v)}; }
  static Verdict error(std::string e, bool timed_out = false) { return {false, std::move(e), timed_out}; }
};

struct RankVerdicts {
  // Indexed by rank, in rank order up to the first failure: a failure
  // decides for everyone, and a rank that disagrees on the world size would
  // otherwise wait for ranks that do not exist. The first failure is the
  // lowest rank that published an error or whose process ended before it
  // published (then its text says so); every rank below it published.
  std::vector<Verdict> of_rank;
  // "rank 1: TEXT; rank 3: TEXT", empty when every rank is ok.
  std::string failures() const;
  int first_failed() const;  // -1 when none
};

// Publishes `mine` (once: a second publication under the same rank keeps the
// first) and reads every rank's verdict in one store request, which returns
// once all are there or one failed or ended (the topic's death certificate,
// `topic/failed`, registered by the group's join), waiting at most until `dl`. Every rank
// that reads a failure stops, so all of them decide alike.
RankVerdicts exchange_verdicts(Store& store, std::string_view topic, int rank, int size, const Verdict& mine,
                               const Deadline& dl);

// "Publish mine, learn whether everyone is ok", for the rendezvous that need
// agreement and not each other's values: a counter and a first-failure key,
// so O(1) store requests and bytes per rank (exchange_verdicts' answers
// grow with the group). Returns ok, or the first failure every rank reads
// alike. Throws AgreementTimedOut naming the ranks that never published. The
// ranks must agree on `size` (init's check-in makes sure).
struct GroupVerdict {
  int failed_rank = -1;
  std::string failure;
  bool gave_up = false;  // the failure is a timeout of failed_rank's (a silent peer), not an error or a death
  bool lost = false;     // the failure is failed_rank's death (its connection to the store closed)
  bool ok() const { return failed_rank < 0; }
};

// An agreement that ended in a timeout: this rank's own (silent() names the
// ranks it found had not published) or another rank's (silent() is empty:
// that rank knew who). A TimeoutError, so a caller that only needs the text
// sees one; shrink() uses silent() to leave those ranks out of its next try
// instead of waiting for them a whole timeout again.
class AgreementTimedOut : public TimeoutError {
 public:
  AgreementTimedOut(const std::string& what, std::vector<int> silent)
      : TimeoutError(what), silent_(std::move(silent)) {}
  const std::vector<int>& silent() const noexcept { return silent_; }

 private:
  std::vector<int> silent_;
};
// The ranks a topic's failure key names as ended: the ";lost R" records the
// store appends when a rank's connection closes (its death certificate).
std::set<int> lost_ranks(const std::string& failed);
// The ranks it names as having given up (";timeout R": agree() timed out there).
std::set<int> gave_up_ranks(const std::string& failed);

GroupVerdict agree(Store& store, std::string_view topic, int rank, int size, const Verdict& mine, const Deadline& dl);

// Runs `step` on this rank (it throws to fail), then agree(): throws this
// rank's own exception when its step failed; else ConfigError "rank R could
// not WHAT, so rank M stops too: ..." when another rank's did (an
// AgreementTimedOut with that text when rank R timed out: waiting here, or
// in its step).
void agree_together(Store& store, std::string_view topic, int rank, int size, const Deadline& dl, std::string_view what,
                    const std::function<void()>& step);

// Runs `step` on this rank (its value, or it throws), publishes the outcome
// and reads every rank's. Throws this rank's own exception when its step
// failed; else ConfigError "rank R could not WHAT, so rank M stops too: ..."
// when another rank's did. Returns every rank's value.
std::vector<std::string> run_together(Store& store, std::string_view topic, int rank, int size, const Deadline& dl,
                                      std::string_view what, const std::function<std::string()>& step);

}  // namespace mci
