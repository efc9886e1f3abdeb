// Who is where at one collective position: the one classifier behind both
// the hang report (diag/hang_report.hpp: a rank's own answers, after a
// timeout) and the monitor's verdict (jobview/job_view.hpp: the launchers'
// samples, while the job runs). Each side says what it knows of every
// rank as a RankPlace; this decides, in one place, which ranks never
// reached the position, which are in another collective there, which are
// waiting in it and which have gone past it, so the page and the report
// can never disagree about who everyone waits for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mci::monitor {

// What is known of a rank's process.
enum class Life {
  alive,    // running (or answering)
  done,     // exited cleanly: it owes nothing
  lost,     // exited with an error or a signal
  silent,   // did not answer (dead, frozen, or only slow): the report's case
  no_group  // running, its process group not created yet: the page's case
};

struct RankPlace {
  int rank = 0;
  Life life = Life::alive;
  std::uint64_t entered = 0;      // the newest collective it has entered (0: none)
  std::uint64_t running_seq = 0;  // the collective it is in now (0: none)
  std::string running;            // what that is, in the caller's words (kind, or a full description)
  std::string at_position;        // what it called at the position, if it has left it (empty: unknown)
};

enum class Where {
  waiting,        // in the collective at the position
  passed,         // entered it and has left it (or is between operations)
  never_entered,  // has not reached the position (or has no group yet)
  elsewhere,      // in, or called, another collective at the same position: a mismatch
  lost,           // gone with an error
  silent,         // nothing known
  done            // exited cleanly
};

struct Positions {
  std::uint64_t position = 0;
  std::vector<int> ranks;    // the places' ranks, in the order given
  std::vector<Where> where;  // one per place given, in the same order
  // The ranks the others wait for, in rank order: never entered, in
  // another collective, or lost. What a stalled job's verdict names.
  std::vector<int> missing;
  std::vector<int> of(Where w) const;  // the ranks in one class, in the order given
};

// The position a group should be at: the furthest any rank has entered
// (one that has ended included: the others must reach where it went).
std::uint64_t furthest_position(std::span<const RankPlace> places);

// Classifies every rank against the collective at `position`, which is
// `what` (in the same words as RankPlace::running).
Positions classify_positions(std::span<const RankPlace> places, std::uint64_t position, std::string_view what);

}  // namespace mci::monitor
