#include "diag/hang_report.hpp"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "diag/dump_registry.hpp"
#include "mci/errors.hpp"
#include "monitor/positions.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"

namespace mci::diag {

namespace {

std::string seconds(double ms) { return fmt::format("{:.1f} s", ms / 1000.0); }

// What is known of a process on this host: gone, stopped (neither can
// answer, so nobody need wait for it), or running (it may answer late).
struct Fate {
  std::string text;
  bool cannot_answer = false;
};

Fate local_process_fate(long long pid) {
  if (pid <= 0) return {};
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return {fmt::format("process {} has exited", pid), true};
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto rp = line.rfind(')');
  const char state = rp != std::string::npos && rp + 2 < line.size() ? line[rp + 2] : '?';
  if (state == 'Z') return {fmt::format("process {} has exited (zombie)", pid), true};
  if (state == 'T' || state == 't') return {fmt::format("process {} is stopped (SIGSTOP or a debugger)", pid), true};
  return {fmt::format("process {} is alive but its mci threads do not answer (frozen)", pid), false};
}

// Rank r's fate as its claim at init tells it (the process and its host).
Fate rank_fate(Store& store, int r, const std::string& me_host) {
  try {
    const std::string key = keys::rank_claim(r);
    const records::RankClaim who = records::decode_rank_claim(to_string(store.get(key, std::chrono::milliseconds(200))),
                                                              "store key '" + key + "'");
    return who.host == me_host ? local_process_fate(who.pid)
                               : Fate{fmt::format("process {} on {}: gone or frozen", who.pid, who.host), false};
  } catch (const std::exception&) {
    return {"gone or frozen", false};
  }
}

}  // namespace

records::RankState rank_state(const FlightRecorder& fr, std::uint64_t asked_seq) {
  const std::int64_t now = now_ns();
  records::RankState st;
  st.last_completed = "none";
  std::uint64_t last_completed_id = 0;
  for (const OpRecord& r : fr.last(fr.capacity())) {
    if (!is_p2p(r.kind)) {
      st.queued = std::max(st.queued, r.seq);
      if (r.state != OpState::enqueued) st.entered = std::max(st.entered, r.seq);
      // What this rank called at the asked position, even if it has left it.
      if (asked_seq != 0 && r.seq == asked_seq && r.state != OpState::enqueued) st.at_seq = r.describe();
    }
    if (r.state == OpState::completed && r.id > last_completed_id) {
      last_completed_id = r.id;
      st.last_completed = r.describe();
    }
  }
  auto ms_since = [&](std::int64_t then) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, now - then)) / 1000000;
  };
  if (const std::uint64_t id = fr.running()) {
    if (auto r = fr.get(id)) {
      st.running = r->describe();
      st.running_seq = r->seq;
      st.running_ms = ms_since(r->started_ns);
    }
  } else {
    st.idle_ms = ms_since(fr.idle_since_ns());
  }
  return st;
}

HangResponder::HangResponder(std::shared_ptr<Store> own, int rank, const FlightRecorder& fr)
    : store_(std::move(own)), rank_(rank), fr_(fr) {
  thread_ = std::thread([this] { loop(); });
}

HangResponder::~HangResponder() {
  stopping_ = true;
  store_->interrupt();
  if (thread_.joinable()) thread_.join();
}

void HangResponder::loop() {
  for (std::uint64_t id = 1; !stopping_;) {
    try {
      // Who asks, and about which collective.
      const std::string key = fmt::format("diag/req/{}", id);
      const records::HangRequest req =
          records::decode_hang_request(to_string(store_->get(key, std::chrono::hours(1))), "store key '" + key + "'");
      // This rank's flight recorder is written where its dumps go, if
      // anywhere, so the ranks that never reached the stuck operation dump
      // too; before answering, so that every rank that answered has its
      // file when the report is complete (the job may end right after it).
      dump_automatically(fr_, fmt::format("the hang report of rank {}", req.rank));
      store_->set(fmt::format("diag/ans/{}/{}", id, rank_),
                  to_bytes(records::encode_rank_state(rank_state(fr_, req.seq))));
      ++id;
    } catch (const TimeoutError&) {
      // Nobody asked for an hour: ask again.
    } catch (const std::exception& e) {
      if (!stopping_) log::debug("hang responder stops: {}", e.what());
      return;  // the store is gone or we are shutting down
    }
  }
}

namespace {

std::string called_key(std::uint64_t seq, int rank) { return fmt::format("diag/called/{}/{}", seq, rank); }

// Which ranks are the odd ones out, from what each called at one position:
// the ranks outside the largest group, when one group is larger than every
// other. Comparing with the reporting rank (or with the first file read,
// as torchfrtrace does) blames the majority whenever the reporter is the
// odd one. Returns the report's line, and fills `odd`.
std::string odd_ones_out(const std::map<std::string, std::vector<int>>& called, std::vector<int>& odd) {
  const auto most = std::max_element(called.begin(), called.end(),
                                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  const bool alone = std::count_if(called.begin(), called.end(),
                                   [&](const auto& c) { return c.second.size() == most->second.size(); }) == 1;
  std::string split;
  for (const auto& [op, ranks] : called) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    split += fmt::format("{}{} by rank(s) {}", split.empty() ? "" : "; ", op, fmt::join(sorted, ", "));
    if (alone && op != most->first) odd.insert(odd.end(), sorted.begin(), sorted.end());
  }
  if (!alone)
    return fmt::format("The ranks that answered split evenly ({}): no majority says which is wrong.\n", split);
  std::sort(odd.begin(), odd.end());
  return fmt::format("The odd one(s) out: rank(s) {} ({} ranks called {}; {}).\n", fmt::join(odd, ", "),
                     most->second.size(), most->first, split);
}

}  // namespace

namespace {

std::string rank_list(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += fmt::format("{}{}", s.empty() ? "" : ", ", r);
  return s;
}

// One report, in its steps: ask every rank, gather the answers (or why
// there is none), classify them all at once (monitor/positions.hpp, the
// page's classifier too), write a line per rank, then the conclusions.
class ReportMaker {
 public:
  ReportMaker(Store& store, int rank, int size, const OpRecord& stuck, std::chrono::milliseconds waited,
              std::chrono::milliseconds answer_wait, const ReportCause& cause)
      : store_(store),
        rank_(rank),
        size_(size),
        stuck_(stuck),
        what_(stuck.describe()),
        waited_(waited),
        answer_wait_(answer_wait),
        cause_(cause),
        collective_(!is_p2p(stuck.kind)) {}

  HangReport make() {
    std::string out = fmt::format("mci {} report for {} (rank {} waited {}):\n", cause_.title, what_, rank_,
                                  seconds(waited_.count()));
    std::uint64_t id = 0;
    try {
      id = ask();
    } catch (const std::exception& e) {
      return {out + fmt::format("  (no report: the store cannot be reached: {})\n", e.what()), {}, {}, {}, {}, {}};
    }
    gather(id);
    const monitor::Positions at = monitor::classify_positions(places_, stuck_.seq, what_);
    called_[what_].push_back(rank_);
    for (int r = 0; r < size_; ++r) out += line(r, at.where[static_cast<std::size_t>(r)]) + "\n";
    const std::vector<int> never = collective_ ? at.of(monitor::Where::never_entered) : std::vector<int>{};
    std::vector<int> odd_ones;
    out += conclusions(never, odd_ones);
    return {out, mismatched_, silent_, cannot_, odd_ones, never};
  }

 private:
  // Publishes the request; its id.
  std::uint64_t ask() {
    // A short request first: a store that cannot be reached (its host lost,
    // a link cut) fails it within a second, and the report says so rather
    // than holding the timeout's error for the store's own timeout.
    try {
      store_.get("diag/reachable", std::chrono::milliseconds(1));
    } catch (const TimeoutError&) {
      // the answer a store gives for a key that is not there
    }
    // What this rank called there, left for the reports of the others: a
    // rank that has ended by then cannot answer them, and without it they
    // could not tell the odd one out.
    if (collective_) store_.set(called_key(stuck_.seq, rank_), to_bytes(what_));
    const auto id = static_cast<std::uint64_t>(store_.add("diag/req_counter", 1));
    store_.set(fmt::format("diag/req/{}", id), to_bytes(records::encode_hang_request({rank_, stuck_.seq})));
    return id;
  }

  void gather(std::uint64_t id) {
    const auto deadline = Clock::now() + answer_wait_;
    const std::string me_host = host_name();
    answers_.resize(static_cast<std::size_t>(size_));
    silent_lines_.resize(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const std::string answer = fmt::format("diag/ans/{}/{}", id, r);
      records::RankState& f = answers_[static_cast<std::size_t>(r)];
      bool answered = false;
      std::optional<Fate> fate;
      try {
        // A process on this host that is stopped or gone cannot answer: its
        // fate is the answer, and nobody waits for it.
        if (r != rank_ && !store_.check({answer})) {
          if (Fate known = rank_fate(store_, r, me_host); known.cannot_answer) fate = std::move(known);
        }
        if (!fate) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
          f = records::decode_rank_state(to_string(store_.get(answer, std::max(left, std::chrono::milliseconds(1)))),
                                         "store key '" + answer + "'");
          answered = true;
        }
      } catch (const std::exception&) {
      }
      monitor::RankPlace place;
      place.rank = r;
      if (answered && r == rank_) {
        place.entered = place.running_seq = stuck_.seq;
        place.running = what_;
      } else if (answered) {
        place.entered = f.entered;
        place.running_seq = f.running_seq;
        place.running = f.running;
        place.at_position = f.at_seq;
      } else {
        place.life = monitor::Life::silent;
        std::string& line = silent_lines_[static_cast<std::size_t>(r)];
        if (fate) {
          cannot_.push_back(r);
          line = fmt::format("cannot answer: {}", fate->text);
        } else {
          const Fate later = rank_fate(store_, r, me_host);
          if (later.cannot_answer) cannot_.push_back(r);
          line = fmt::format("did not answer within {}: {}", seconds(answer_wait_.count()), later.text);
        }
      }
      places_.push_back(std::move(place));
    }
  }

  // A rank that did not answer: why, and what its own report said it called.
  std::string silent_line(int r) {
    silent_.push_back(r);
    std::string line = silent_lines_[static_cast<std::size_t>(r)];
    try {
      // Not this rank's own (its own answer only came late): it is counted already.
      if (collective_ && r != rank_ && store_.check({called_key(stuck_.seq, r)})) {
        const std::string its = to_string(store_.get(called_key(stuck_.seq, r), std::chrono::milliseconds(1)));
        called_[its].push_back(r);
        if (its != what_) mismatched_.push_back(r);
        line += fmt::format("; its own report said it called {} there", its);
      }
    } catch (const std::exception&) {
      // the report goes on without it
    }
    return line;
  }

  std::string line(int r, monitor::Where where) {
    const std::string head = fmt::format("  rank {}: ", r);
    if (where == monitor::Where::silent) return head + silent_line(r);
    const records::RankState& f = answers_[static_cast<std::size_t>(r)];
    const std::string& running = f.running;
    const std::string doing = !running.empty()
                                  ? fmt::format("inside {} for {}", running, seconds(f.running_ms))
                                  : fmt::format("alive, outside mci (in user code) for {}", seconds(f.idle_ms));
    if (r == rank_)
      return head + fmt::format("waited {} in {} ({})", seconds(waited_.count()), what_, cause_.seen_here);
    if (!collective_) return head + doing + "; last completed: " + f.last_completed;
    switch (where) {
      case monitor::Where::never_entered:
        return head + fmt::format("never entered {}; {}; last completed: {}", what_, doing, f.last_completed) +
               (f.queued >= stuck_.seq ? " (it is queued behind earlier async work)" : "");
      case monitor::Where::elsewhere:
        mismatched_.push_back(r);
        if (f.running_seq == stuck_.seq) {
          called_[running].push_back(r);
          return head + fmt::format("is in {} at the same position, not in {}: the ranks called different collectives",
                                    running, what_);
        }
        // It has left that position already (its own timeout, most likely).
        called_[f.at_seq].push_back(r);
        return head +
               fmt::format("called {} at the same position, not {}: the ranks called different collectives; now {}",
                           f.at_seq, what_, doing);
      case monitor::Where::waiting:
        called_[what_].push_back(r);
        return head + fmt::format("entered {} and is waiting in it ({})", what_, doing);
      default:
        if (f.at_seq == what_) called_[what_].push_back(r);
        return head + fmt::format("entered {}; now {}; last completed: {}", what_, doing, f.last_completed);
    }
  }

  std::string conclusions(const std::vector<int>& never, std::vector<int>& odd_ones) const {
    std::string out;
    if (!silent_.empty()) {
      out += fmt::format(
          "Ranks that did not answer: {} (dead or frozen; their own output or mcirun's "
          "summary says which).\n",
          rank_list(silent_));
    }
    if (!mismatched_.empty()) {
      out += fmt::format(
          "Ranks in a different collective at #{} than rank {}: {}. A mismatch, not a hang: every rank must call "
          "the same collectives in the same order with the same count, dtype, op and root.\n",
          stuck_.seq, rank_, rank_list(mismatched_));
    }
    if (called_.size() > 1) out += odd_ones_out(called_, odd_ones);
    if (!collective_) return out;
    if (!never.empty()) {
      out += fmt::format(
          "Ranks that never entered {}: {}. A hang, not a slow step: those ranks "
          "must reach the same collective.\n",
          what_, rank_list(never));
    } else if (silent_.empty() && mismatched_.empty()) {
      out += fmt::format("Every rank entered {}: look for a rank stuck inside it or a dead link.\n", what_);
    }
    return out;
  }

  Store& store_;
  const int rank_, size_;
  const OpRecord& stuck_;
  const std::string what_;
  const std::chrono::milliseconds waited_, answer_wait_;
  const ReportCause& cause_;
  const bool collective_;
  std::vector<records::RankState> answers_;
  std::vector<std::string> silent_lines_;  // why a rank did not answer
  std::vector<monitor::RankPlace> places_;
  std::vector<int> silent_, mismatched_, cannot_;
  // What each rank called at the stuck position, as far as the answers say.
  std::map<std::string, std::vector<int>> called_;
};

}  // namespace

HangReport collect_hang_report(Store& store, int rank, int size, const OpRecord& stuck,
                               std::chrono::milliseconds waited, std::chrono::milliseconds answer_wait,
                               const ReportCause& cause) {
  return ReportMaker(store, rank, size, stuck, waited, answer_wait, cause).make();
}

}  // namespace mci::diag
