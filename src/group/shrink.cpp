// ProcessGroup::shrink: the ranks still alive agree on who is gone and form
// the group of the others, over the same store (docs/fault-tolerance.md).
//
// Agreement through the store, in a constant number of requests per rank
// (docs/scale.md): each survivor appends itself to the attempt's "arrived"
// list; the store itself appends a rank to the group's "gone" list when its
// process's connection ends (the certificate join_group registered). Once
// every rank of the group is arrived, gone or excluded, the first survivor to
// see it fixes the decision (a DecideOnce, store/decide_once.hpp), and every
// survivor adopts that one value: survivors that read the lists at different moments (a
// rank dying meanwhile) still decide alike. If a rank of the decision dies
// while the survivors form their group, that join fails for all of them (the
// certificate join_group registers first thing stops the check-in) and they
// agree again, one attempt later. (A certificate registered earlier, at
// arrival, would also fire for a rank the decision left out.)
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/registry.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "group/group_impl.hpp"
#include "group/join.hpp"
#include "group/kept_ranks_watch.hpp"
#include "mci/errors.hpp"
#include "store/all_ranks.hpp"
#include "store/decide_once.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"

namespace mci {

namespace {

// How often a survivor whose lists are not complete reads them again; a
// decision written meanwhile wakes it at once (it waits on that key).
constexpr auto kPoll = std::chrono::milliseconds(2);

using records::Member;

DecideOnce::Terms shrink_terms(int attempt, int rank, int size) {
  return {keys::shrink(attempt),
          fmt::format("the shrink decision of rank {}'s group of {} (attempt {})", rank, size, attempt),
          "every rank that stays calls shrink(); past the group's timeout the ones that came decide without the "
          "others",
          [](const records::Record& r) {
            const records::Arrivals a = records::decode_arrivals(records::encode(r), "an arrival");
            return a.members.empty() ? std::string()
                                     : fmt::format("rank {} ({})", a.members[0].rank, a.members[0].host);
          }};
}

// A survivor's proposal once every rank of the group is arrived, gone or
// excluded, or past the group's timeout (`last`: a rank that did not come
// is lost too): the arrived ranks that are neither gone nor excluded, in
// rank order. `unanswered` (ranks this rank's hang report did not hear
// from) are not waited for once `unanswered_due`, but kept if they came:
// an answer late only because the store was slow is no proof of death,
// and excluding such a rank split the survivors (the fault matrix's cut
// link on etcd kept one rank of four).
std::optional<std::string> propose_survivors(DecideOnce& agreement, Store& s, int size, const std::set<int>& excluded,
                                             const std::set<int>& out_before, const std::set<int>& unanswered,
                                             bool unanswered_due, bool last) {
  const std::set<int> gone = certified_gone(s);
  // Each poll costs O(1) bytes (a counter, the short list of the gone); the
  // whole list is read only when the counts say everyone may be in.
  const std::size_t skipped = unanswered_due ? unanswered.size() : 0;
  const auto known = static_cast<std::int64_t>(gone.size() + excluded.size() + out_before.size() + skipped);
  if (agreement.count() + known < size && !last) return std::nullopt;
  const records::Arrivals listed =
      records::decode_arrivals(agreement.arrivals(), "store key '" + agreement.arrived_key() + "'");
  std::set<int> accounted(gone.begin(), gone.end());
  accounted.insert(listed.excluded.begin(), listed.excluded.end());
  accounted.insert(out_before.begin(), out_before.end());
  if (unanswered_due) accounted.insert(unanswered.begin(), unanswered.end());
  for (const auto& m : listed.members) accounted.insert(m.rank);
  if (static_cast<int>(accounted.size()) < size && !last) return std::nullopt;
  std::vector<Member> keep;
  for (const auto& m : listed.members) {
    if (!gone.count(m.rank) && !listed.excluded.count(m.rank) &&
        std::none_of(keep.begin(), keep.end(), [&](const Member& k) { return k.rank == m.rank; })) {
      keep.push_back(m);
    }
  }
  // Nobody to keep: this rank was left out (a decision exists, read next)
  // or every other rank is gone. Not a decision to write.
  if (keep.empty()) return std::nullopt;
  std::sort(keep.begin(), keep.end(), [](const Member& a, const Member& b) { return a.rank < b.rank; });
  return records::encode_members(keep);
}

}  // namespace

ProcessGroup::Shrunk ProcessGroup::Impl::shrink(const std::vector<int>& exclude) {
  if (const BackendEntry* b = find_backend(backend_name); b && !b->caps.shrinks) {
    throw ConfigError(fmt::format(
        "shrink() on rank {}: backend {} cannot go on without a lost rank ({}); use a backend that can: {}; or "
        "restart the job (mcirun --max-restarts)",
        rank, backend_name, b->cannot_shrink, backends_with(&BackendCaps::shrinks)));
  }
  if (!session_.certified) {
    throw ConfigError(
        fmt::format("shrink() on rank {}: this group was formed on a store that cannot tell when a process is gone "
                    "(only mci's TCP store can: the launcher's, rank 0's, or a TcpStore in InitOptions::store). "
                    "Form the group on one of those, or restart the job instead (mcirun --max-restarts)",
                    rank));
  }
  std::set<int> excluded;
  for (int r : exclude) {
    if (r < 0 || r >= size) {
      throw ConfigError(fmt::format("shrink(exclude) on rank {}: rank {} is not in this group of {}", rank, r, size));
    }
    excluded.insert(r);
  }
  if (excluded.count(rank)) {
    throw ConfigError(
        fmt::format("shrink(exclude) on rank {}: this rank is excluded; only the ranks that stay call "
                    "shrink()",
                    rank));
  }
  // A rank this group's hang report found stopped or gone is left out too:
  // waiting a whole timeout again for one that could not answer the report
  // is what doubled a stopped rank's cost. One that only did not answer in
  // time is waited for a report's wait, and kept if it comes.
  std::set<int> unanswered;
  {
    std::lock_guard lk(mu_);
    for (int r : suspects_) {
      if (r != rank && !excluded.count(r)) {
        log::info("rank {}: shrink leaves out rank {}, which could not answer this group's hang report", rank, r);
        excluded.insert(r);
      }
    }
    for (int r : unanswered_) {
      if (r != rank && !excluded.count(r)) unanswered.insert(r);
    }
  }
  const auto unanswered_due =
      std::chrono::steady_clock::now() + std::min(timeout(), report_wait_.count() > 0 ? report_wait_ : timeout() / 4);
  // Peers still inside an operation of this group fail now and come here,
  // instead of waiting for a rank that will never answer.
  {
    std::lock_guard lk(mu_);
    if (abort_reason_.empty()) abort_reason_ = fmt::format("rank {} left the group to shrink it", rank);
  }
  abort_requested_.store(true, std::memory_order_release);
  fail_group(fmt::format("rank {} left the group to shrink it", rank));

  Deadline dl(timeout());
  int timed_out_tries = 0;
  // Every survivor honours every survivor's exclusions: a rank excluded by
  // one is never kept by a decision another writes (the excluding rank's
  // arrival, with its exclusions, comes before any decision that counts it).
  std::string me;
  for (int r : excluded) me += records::encode_exclusion(r);
  me += records::encode_member({rank, host_name()});
  std::set<int> out_before;  // ranks a failed attempt's decision left out: they never come again
  for (int attempt = 0;; ++attempt) {
    DecideOnce agreement(*store_, shrink_terms(attempt, rank, size));
    agreement.arrive(me);
    const auto poll = kPoll * std::max(1, size / 64);  // the server sees at most ~32k polls/s
    const std::string decision = agreement.settle(dl, poll, [&](bool last) {
      return propose_survivors(agreement, *store_, size, excluded, out_before, unanswered,
                               std::chrono::steady_clock::now() >= unanswered_due, last);
    });
    const auto kept = records::decode_members(decision, "store key '" + agreement.decision_key() + "'");
    Shrunk result;
    Place place;
    place.world = static_cast<int>(kept.size());
    // The local rank stays: it names this process's device.
    place.local_rank = local_rank;
    place.local_world = 0;
    const std::string my_host = host_name();
    int found = -1;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      result.kept.push_back(kept[i].rank);
      if (kept[i].rank == rank) found = static_cast<int>(i);
      if (kept[i].host == my_host) ++place.local_world;
    }
    for (int r = 0; r < size; ++r) {
      if (std::find(result.kept.begin(), result.kept.end(), r) == result.kept.end()) result.lost.push_back(r);
    }
    if (found < 0) {
      throw PeerError(fmt::format("rank {} was left out when its group of {} shrank: the others decided without it "
                                  "(they excluded it, it came after they had decided, or the store saw its "
                                  "connection end); kept ranks: {}. It cannot rejoin that group: end this process "
                                  "(a replacement is a new process)",
                                  rank, size, fmt::join(result.kept, ", ")),
                      rank);
    }
    place.rank = found;
    try {
      const std::string root = session_.prefix + "/" + keys::shrink(attempt, "group");
      const KeptRanksWatch watch(store_, origin_.base, root, result.kept, poll);
      result.group = join_group(origin_, root, place);
      // Its members keep their job ranks in dumps (the files' names).
      if (dump_) {
        const std::vector<int> job = dump_->group().job_ranks;
        std::vector<int> kept_job;
        for (int r : result.kept) kept_job.push_back(job.at(static_cast<std::size_t>(r)));
        result.group->name_for_dumps("", "", kept_job);
      }
      log::info("rank {} is rank {} of {} after shrinking (lost: {})", rank, place.rank, place.world,
                fmt::join(result.lost, ", "));
      return result;
    } catch (const TimeoutError& e) {
      // A kept rank went silent while we met (stopped, or cut off): the new
      // group's agreements waited the group's timeout for it. A rank that
      // timed out at an agreement knows who (AgreementTimedOut::silent())
      // and leaves them out of the next try, which it can then decide at
      // once; the others (told that a rank timed out, or that timed out
      // elsewhere: a Gloo connection) try again too, and whoever has not
      // arrived within a short window is left out: the survivors all come
      // at once, each having waited its timeout. At most three such tries:
      // each leaves out who was silent, and what times out every try alike
      // (a store out of reach) must not cost a timeout per rank.
      if (++timed_out_tries > 3) throw;
      log::warn("rank {}: forming the shrunk group timed out ({}); agreeing again without the silent", rank, e.what());
      for (int r : result.lost) out_before.insert(r);
      if (const auto* named = dynamic_cast<const AgreementTimedOut*>(&e)) {
        for (int r : named->silent()) out_before.insert(result.kept.at(static_cast<std::size_t>(r)));
      }
      dl = Deadline(std::min(timeout(), report_wait_.count() > 0 ? report_wait_ : timeout() / 4));
    } catch (const Error& e) {
      // A kept rank died while we met: everyone of this decision fails
      // alike (the certificate stops the check-in) and agrees again.
      if (dl.expired()) throw;
      log::warn("rank {}: forming the shrunk group failed ({}); agreeing again", rank, e.what());
      for (int r : result.lost) out_before.insert(r);
    }
  }
}

}  // namespace mci
