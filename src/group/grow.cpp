// Replacing lost ranks: a process started in a lost rank's place
// (join_running_group) waits in the store of the group that runs now; the
// members, at a step boundary, see it (joiners_waiting) and form the group
// of the members and the processes waiting (grow). docs/fault-tolerance.md.
//
// Keys (store/keys.hpp): LINEAGE/current names the session of the group
// that runs now (rank 0 of every group made from one init writes it); under
// SESSION/grow, a DecideOnce (store/decide_once.hpp): the processes waiting
// arrive (records::Joiner), and rank 0 decides: the members' count and the
// joiners taken, in their order (records::GrowDecision). A joiner not taken
// (it came after the decision) waits for the next group.
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/auth.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"
#include "group/group_impl.hpp"
#include "group/join.hpp"
#include "group/kept_ranks_watch.hpp"
#include "mci/errors.hpp"
#include "store/decide_once.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"

namespace mci {

namespace {

// A joiner's checks while it waits for a decision: the group that runs may
// change meanwhile (a shrink), and a decision wakes it at once.
constexpr auto kJoinPoll = std::chrono::milliseconds(50);

// How often a member waiting for rank 0's grow decision reads the group's
// death certificates; the decision itself wakes it at once.
constexpr auto kGonePoll = std::chrono::milliseconds(5);

constexpr const char* kDecisionName = "the store's grow decision (key grow/decision)";

// The grow of the session under `session` ("" for the group's own store,
// which has the session's prefix already).
DecideOnce grow_agreement(Store& s, const std::string& session) {
  return DecideOnce(
      s, {(session.empty() ? "" : session + "/") + keys::kGrow, "rank 0's grow decision (who joins the group)",
          "every member calls ProcessGroup::grow() when joiners_waiting() is true (true on every rank at once): "
          "check that rank 0 did, or that it is still running",
          [](const records::Record& r) {
            const auto j = records::decode_joiners(records::encode(r), "an arrival");
            return fmt::format("the process {} on {}", j.at(0).id, j.at(0).host);
          }});
}

}  // namespace

bool ProcessGroup::Impl::joiners_waiting() {
  std::uint8_t waiting = 0;
  if (rank == 0) waiting = store_->check({grow_agreement(*store_, "").arrived_key()}) ? 1 : 0;
  submit(Call{.kind = OpKind::broadcast, .in = view(&waiting, 1), .out = view(&waiting, 1), .root = 0}, Exec::blocking);
  return waiting != 0;
}

ProcessGroup::Grown ProcessGroup::Impl::grow() {
  // Rank 0 takes the joiners waiting now; the others read what it took.
  DecideOnce agreement = grow_agreement(*store_, "");
  // The others wait for rank 0's decision, and stop as soon as the store
  // has rank 0's death certificate (its connection ended): a rank 0 lost
  // before deciding used to hold them for the whole timeout.
  const auto rank0_lost = [&](bool) -> std::optional<std::string> {
    if (certified_gone(*store_).count(0)) {
      throw PeerError(fmt::format("grow() on rank {}: rank 0, which decides who joins, was lost before it decided; "
                                  "shrink() the group (the joiners wait for the next grow)",
                                  rank),
                      0);
    }
    return std::nullopt;
  };
  const std::string decision = rank == 0 ? agreement.decide(records::encode_grow_decision(size, agreement.arrivals()))
                                         : agreement.settle(Deadline(timeout()), kGonePoll, rank0_lost);
  const records::GrowDecision d = records::decode_grow_decision(decision, kDecisionName);
  const std::string me = host_name();
  Place place{rank, d.members + static_cast<int>(d.joiners.size()), local_rank, local_size};
  for (const auto& j : d.joiners) {
    if (j.host == me) ++place.local_world;
  }
  Grown g;
  g.joined = static_cast<int>(d.joiners.size());
  const std::string root = session_.prefix + "/" + keys::kGrowGroup;
  // The members keep their ranks; the joiners come after them (not watched:
  // they have no certificate in this group).
  std::vector<int> kept(static_cast<std::size_t>(place.world), -1);
  for (int r = 0; r < d.members; ++r) kept[static_cast<std::size_t>(r)] = r;
  const KeptRanksWatch watch(store_, origin_.base, root, std::move(kept), kGonePoll * std::max(1, size / 64));
  g.group = join_group(origin_, root, place);
  log::info("rank {} of {}: the group grew by {} joiner(s)", place.rank, place.world, g.joined);
  return g;
}

std::shared_ptr<ProcessGroup> wait_to_join(const GroupOrigin& origin, int local_rank) {
  const Deadline dl(origin.opts.timeout);
  const auto nonce = auth::random_nonce();
  const records::Joiner me{host_name(), fmt::format("{}-{:02x}{:02x}{:02x}{:02x}", ::getpid(), nonce[0], nonce[1],
                                                    nonce[2], nonce[3])};
  Store& s = *origin.base;
  std::string registered;  // the session whose joiners list has this process
  while (true) {
    if (dl.expired()) {
      std::string where;  // the other joiners of that session, if this one got so far
      if (!registered.empty()) {
        DecideOnce waited = grow_agreement(s, registered);
        where = fmt::format(" (it waited in store key '{}', where {})", waited.arrived_key(), waited.roll_call());
      }
      throw TimeoutError(fmt::format(
          "join_running_group: the running group did not take this process within {} ms{}. Its members must call "
          "ProcessGroup::joiners_waiting() at each step boundary and grow() when it is true (elastic_train does "
          "under mcirun --on-rank-loss=replace); check that the program does, or that the job is still running",
          dl.budget().count(), where));
    }
    const std::string session = to_string(s.get(keys::current_session(origin.lineage), dl.wait_left()));
    DecideOnce agreement = grow_agreement(s, session);
    if (session != registered) {
      agreement.arrive(records::encode_joiner(me));
      registered = session;
    }
    const std::optional<std::string> decision = agreement.decision(std::min(kJoinPoll, dl.wait_left()));
    if (!decision) continue;
    const records::GrowDecision d = records::decode_grow_decision(*decision, kDecisionName);
    const auto it = std::find(d.joiners.begin(), d.joiners.end(), me);
    if (it == d.joiners.end()) continue;  // came after the decision: the next group takes it
    Place place;
    place.rank = d.members + static_cast<int>(it - d.joiners.begin());
    place.world = d.members + static_cast<int>(d.joiners.size());
    place.local_rank = local_rank;
    place.local_world = local_rank + 1;  // only rank, world and local_rank matter to the backends
    auto g = join_group(origin, session + "/" + keys::kGrowGroup, place);
    log::info("joined the running group as rank {} of {}", place.rank, place.world);
    return g;
  }
}

}  // namespace mci
