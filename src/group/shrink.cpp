// ProcessGroup::shrink: the ranks still alive agree on who is gone and form
// the group of the others, over the same store (docs/fault-tolerance.md).
//
// Agreement through the store, in a constant number of requests per rank
// (docs/scale.md): each survivor appends itself to the attempt's "arrived"
// list; the store itself appends a rank to the group's "gone" list when its
// process's connection ends (the certificate join_group registered). Once
// every rank of the group is arrived, gone or excluded, the first survivor to
// see it writes the decision with compare_set, and every survivor adopts
// that one value: survivors that read the lists at different moments (a
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
#include "mci/errors.hpp"

namespace mci {

namespace {

// How often a survivor whose lists are not complete reads them again; a
// decision written meanwhile wakes it at once (it waits on that key).
constexpr auto kPoll = std::chrono::milliseconds(2);

struct Member {
  int rank = 0;
  std::string host;
};

// "R@HOST;R@HOST;" (arrivals and decisions) or "R;R;" (certificates).
std::vector<Member> parse_members(const StoreValue& v) {
  std::vector<Member> out;
  const std::string s = to_string(v);
  std::size_t at = 0;
  while (at < s.size()) {
    const auto end = s.find(';', at);
    const std::string item = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? s.size() : end + 1;
    if (item.empty()) continue;
    const auto sep = item.find('@');
    Member m;
    try {
      m.rank = std::stoi(item.substr(0, sep));
    } catch (const std::exception&) {
      continue;  // not written by mci: ignored rather than trusted
    }
    if (sep != std::string::npos) m.host = item.substr(sep + 1);
    out.push_back(std::move(m));
  }
  return out;
}

// The ranks some survivor excludes: "xR;" items of the arrivals. Every
// survivor honours every survivor's exclusions: a rank excluded by one is
// never kept by a decision another writes (the excluding rank's arrival,
// with its exclusions, comes before any decision that counts it).
std::set<int> exclusions(const StoreValue& v) {
  std::set<int> out;
  const std::string s = to_string(v);
  for (std::size_t at = s.find('x'); at != std::string::npos; at = s.find('x', at + 1)) {
    if (at > 0 && s[at - 1] != ';') continue;
    try {
      out.insert(std::stoi(s.substr(at + 1)));
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::string members_text(const std::vector<Member>& ms) {
  std::string s;
  for (const auto& m : ms) s += fmt::format("{}@{};", m.rank, m.host);
  return s;
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
  // Peers still inside an operation of this group fail now and come here,
  // instead of waiting for a rank that will never answer.
  {
    std::lock_guard lk(mu_);
    if (abort_reason_.empty()) abort_reason_ = fmt::format("rank {} left the group to shrink it", rank);
  }
  abort_requested_.store(true, std::memory_order_release);
  fail_group(fmt::format("rank {} left the group to shrink it", rank));

  const Deadline dl(timeout);
  std::string me;
  for (int r : excluded) me += fmt::format("x{};", r);
  me += fmt::format("{}@{};", rank, host_name());
  std::set<int> out_before;  // ranks a failed attempt's decision left out: they never come again
  for (int attempt = 0;; ++attempt) {
    const std::string topic = fmt::format("shrink/{}", attempt);
    Store& s = *store_;
    // The list first, then the count: a count of k means k arrivals listed.
    StoreValue arrivals = s.append(topic + "/arrived", to_bytes(me));
    std::int64_t count = s.add(topic + "/count", 1);
    StoreValue decision;
    const auto poll = kPoll * std::max(1, size / 64);  // the server sees at most ~32k polls/s
    while (true) {
      std::set<int> gone;
      for (const auto& m : parse_members(s.append("gone", {}))) gone.insert(m.rank);
      // Each poll costs O(1) bytes (a counter, the short list of the gone);
      // the whole list is read only when the counts say everyone may be in.
      const auto known = static_cast<std::int64_t>(gone.size() + excluded.size() + out_before.size());
      if (count + known >= size || dl.expired()) {
        arrivals = s.append(topic + "/arrived", {});
        const auto arrived = parse_members(arrivals);
        const std::set<int> left_out = exclusions(arrivals);
        std::set<int> accounted(gone.begin(), gone.end());
        accounted.insert(left_out.begin(), left_out.end());
        accounted.insert(out_before.begin(), out_before.end());
        for (const auto& m : arrived) accounted.insert(m.rank);
        if (static_cast<int>(accounted.size()) >= size || dl.expired()) {
          // Past the group's timeout, a rank that did not come is lost too.
          std::vector<Member> keep;
          for (const auto& m : arrived) {
            if (!gone.count(m.rank) && !left_out.count(m.rank) &&
                std::none_of(keep.begin(), keep.end(), [&](const Member& k) { return k.rank == m.rank; })) {
              keep.push_back(m);
            }
          }
          std::sort(keep.begin(), keep.end(), [](const Member& a, const Member& b) { return a.rank < b.rank; });
          // A decision already written is the one: never a second.
          decision = s.compare_set(topic + "/decision", {}, to_bytes(members_text(keep)));
          break;
        }
      }
      try {
        s.wait({topic + "/decision"}, poll);
        decision = s.get(topic + "/decision");
        break;
      } catch (const TimeoutError&) {
      }
      count = s.add(topic + "/count", 0);
    }

    const auto kept = parse_members(decision);
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
      result.group = join_group(origin_, fmt::format("{}/{}/group", session_.prefix, topic), place);
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
