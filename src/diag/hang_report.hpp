// The hang report. When an operation times out, the rank that noticed asks
// every rank, through the store, what it is doing. Each rank answers from a
// background thread reading its flight recorder, so a rank that is alive but
// busy elsewhere (sleeping in user code, stuck in another collective) still
// answers, and a rank that does not answer is dead or frozen. The report
// names the ranks that never entered the operation and what each was doing.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "diag/flight_recorder.hpp"
#include "mci/store.hpp"
#include "store/records.hpp"

namespace mci::diag {

// Answers each request from the recorder; first, when the group has a
// destination for dumps, it writes this process's flight recorder in torch's
// format (diag/dump_registry.hpp), so every rank asked leaves its file.
class HangResponder {
 public:
  // `own` must be a connection no other thread uses: the responder blocks on it.
  HangResponder(std::shared_ptr<Store> own, int rank, const FlightRecorder& fr);
  ~HangResponder();
  HangResponder(const HangResponder&) = delete;
  HangResponder& operator=(const HangResponder&) = delete;

 private:
  void loop();
  std::shared_ptr<Store> store_;
  int rank_;
  const FlightRecorder& fr_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Where this rank is, as the responder sends it (a record); with asked_seq,
// also what it called at that collective position (at_seq).
records::RankState rank_state(const FlightRecorder& fr, std::uint64_t asked_seq = 0);

struct HangReport {
  std::string text;
  // Ranks found inside a different collective at the stuck one's position:
  // a mismatch, which a backend without fingerprints on the wire (gloo) can
  // only see this way.
  std::vector<int> mismatched;
  // Ranks that did not answer (stopped, gone, frozen, or only slow: a store
  // slowed by a leader's election delays every answer).
  std::vector<int> silent;
  // Of those, the ones this host saw cannot answer (a process here stopped
  // or exited): what a shrink after this timeout leaves out at once. The
  // others it waits for a little, not a whole timeout.
  std::vector<int> cannot_answer;
  // Where the ranks called different collectives at that position and most
  // called one: the ranks that did not (the odd ones out). Empty when they
  // agree, or split with no majority.
  std::vector<int> odd_ones;
  // Ranks that had not reached the position yet (a collective): a hang
  // after a timeout; after a mismatch seen at once, most likely only later.
  std::vector<int> not_there;
};

// Why a report is made: it titles the report and says what this rank saw.
struct ReportCause {
  std::string_view title;      // "hang": "mci hang report for ..."
  std::string_view seen_here;  // this rank's line: "timed out here"
  std::string_view event;      // why the flight recorder was written: "a timeout"
};
inline constexpr ReportCause kTimedOut{"hang", "timed out here", "a timeout"};
inline constexpr ReportCause kMismatchSeen{"mismatch", "saw the mismatch here", "a mismatch"};

// Asks every rank and formats the report about `stuck`, which this rank has
// waited `waited` for. Waits at most `answer_wait` for the answers.
HangReport collect_hang_report(Store& store, int rank, int size, const OpRecord& stuck,
                               std::chrono::milliseconds waited, std::chrono::milliseconds answer_wait,
                               const ReportCause& cause = kTimedOut);

}  // namespace mci::diag
