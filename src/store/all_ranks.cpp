#include "store/all_ranks.hpp"

#include <algorithm>
#include <charconv>
#include <exception>
#include <set>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

namespace {
constexpr std::string_view kOk = "ok:";
constexpr std::string_view kError = "error:";
constexpr std::string_view kTimeout = "timeout:";  // an error that was a timeout

std::string encode(const Verdict& v) { return std::string(v.ok ? kOk : v.timed_out ? kTimeout : kError) + v.text; }

// A failure is also written under topic/failed: the key that stops every
// rank's read of the others at once, whoever has not arrived yet.
std::string failed_key(std::string_view topic) { return fmt::format("{}/failed", topic); }

void publish(Store& store, std::string_view topic, int rank, const Verdict& v) {
  store.compare_set(fmt::format("{}/{}", topic, rank), {}, to_bytes(encode(v)));
  if (!v.ok) store.compare_set(failed_key(topic), {}, to_bytes(std::to_string(rank)));
}

Verdict decode(const std::string& s) {
  if (s.starts_with(kOk)) return Verdict::value(s.substr(kOk.size()));
  if (s.starts_with(kError)) return Verdict::error(s.substr(kError.size()));
  if (s.starts_with(kTimeout)) return Verdict::error(s.substr(kTimeout.size()), true);
  return Verdict::error(fmt::format("published an unreadable verdict '{}'", s));
}
}  // namespace

namespace {
// The ranks of the records "MARK R" in a failure key's value.
std::set<int> marked_ranks(const std::string& failed, std::string_view mark) {
  std::set<int> out;
  for (auto at = failed.find(mark); at != std::string::npos; at = failed.find(mark, at)) {
    at += mark.size();
    int r = 0;
    const auto [end, ec] = std::from_chars(failed.data() + at, failed.data() + failed.size(), r);
    if (ec == std::errc()) out.insert(r);
    at = static_cast<std::size_t>(end - failed.data());
  }
  return out;
}
}  // namespace

std::set<int> lost_ranks(const std::string& failed) { return marked_ranks(failed, ";lost "); }
std::set<int> gave_up_ranks(const std::string& failed) { return marked_ranks(failed, ";timeout "); }

std::string RankVerdicts::failures() const {
  std::string out;
  for (std::size_t r = 0; r < of_rank.size(); ++r) {
    if (!of_rank[r].ok) out += fmt::format("{}rank {}: {}", out.empty() ? "" : "; ", r, of_rank[r].text);
  }
  return out;
}

int RankVerdicts::first_failed() const {
  for (std::size_t r = 0; r < of_rank.size(); ++r) {
    if (!of_rank[r].ok) return static_cast<int>(r);
  }
  return -1;
}

RankVerdicts exchange_verdicts(Store& store, std::string_view topic, int rank, int size, const Verdict& mine,
                               const Deadline& dl) {
  publish(store, topic, rank, mine);
  const std::string prefix(topic);
  const std::string stop = failed_key(topic);
  // One request for all ranks' verdicts: n requests per rendezvous in all.
  auto values = store.get_range(prefix, 0, size, stop, dl.wait_left());
  // Stopped by a failure: every rank must name the same first failure, the
  // lowest rank that published an error or whose process ended before it
  // published (its death certificate, ";lost R", is in the failure key). The
  // ranks below it still count: each arrives, dies, or the wait times out as
  // it would have without the failure. The lost are read before the values
  // they are judged with: a rank lost by then that had published shows its
  // value in the read after, so a missing value of a lost rank is final, and
  // every rank decides alike whenever it reads. A stopped wait (the failure
  // key exists from then on) waits on the first missing rank's key alone.
  constexpr auto poll = std::chrono::milliseconds(50);
  std::set<int> lost;
  std::size_t decided = values.size();
  for (bool first = true;; first = false) {
    int missing = -1;
    decided = values.size();
    for (std::size_t r = 0; r < values.size(); ++r) {
      if (values[r] ? !decode(to_string(*values[r])).ok : lost.count(static_cast<int>(r)) > 0) {
        decided = r;
        break;
      }
      if (!values[r]) {
        missing = static_cast<int>(r);
        break;
      }
    }
    if (missing < 0) break;
    if (!first) {
      if (dl.expired()) {
        throw TimeoutError(
            fmt::format("Timed out waiting {}ms for store key '{}/{}': rank {} did not publish it "
                        "(it did not start, or crashed before this step)",
                        dl.budget().count(), prefix, missing, missing));
      }
      // On the missing rank's own key: its value, or a slice, whichever
      // comes first (a rank lost meanwhile shows at the next look).
      try {
        store.wait({fmt::format("{}/{}", prefix, missing)}, std::min(poll, dl.wait_left()));
      } catch (const TimeoutError&) {
      }
    }
    lost = lost_ranks(to_string(store.get(stop, dl.wait_left())));
    values = store.get_range(prefix, 0, size, stop, dl.wait_left());
  }
  RankVerdicts all;
  all.of_rank.reserve(std::min(values.size(), decided + 1));
  for (std::size_t r = 0; r < values.size() && r <= decided; ++r) {
    all.of_rank.push_back(values[r] ? decode(to_string(*values[r]))
                                    : Verdict::error(fmt::format("its process ended (its connection to the store "
                                                                 "closed) before it published '{}'",
                                                                 prefix)));
  }
  return all;
}

GroupVerdict agree(Store& store, std::string_view topic, int rank, int size, const Verdict& mine, const Deadline& dl) {
  publish(store, topic, rank, mine);
  const std::string done = fmt::format("{}/done", topic);
  if (mine.ok && store.add(fmt::format("{}/count", topic), 1) == size) store.set(done + "/0", to_bytes("ok"));
  try {
    const auto all = store.get_range(done, 0, 1, failed_key(topic), dl.wait_left());
    if (all[0]) return GroupVerdict{};
  } catch (const TimeoutError&) {
    // A rank arriving after this one gave up must not complete the
    // agreement alone (the count would reach the size): it reads the
    // failure instead, as it would a death certificate.
    // The count is poisoned first, so that it can no longer reach the size.
    try {
      (void)store.add(fmt::format("{}/count", topic), -size);
      (void)store.append(failed_key(topic), to_bytes(fmt::format(";timeout {}", rank)));
    } catch (const std::exception&) {
      // the timeout below is the error to report
    }
    // Name who is missing: read what is there, stopped at once by our own key.
    const auto there = store.get_range(std::string(topic), 0, size, fmt::format("{}/{}", topic, rank), dl.budget());
    std::string missing;
    std::vector<int> silent;
    int n = 0;
    for (int r = 0; r < size; ++r) {
      if (there[static_cast<std::size_t>(r)]) continue;
      silent.push_back(r);
      if (++n > 16) continue;
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    }
    throw AgreementTimedOut(fmt::format("Timed out waiting {}ms for rank(s) {}{} to publish '{}' ({} of {} ranks did): "
                                        "they did not start, crashed before this step, or were refused by the store",
                                        dl.budget().count(), missing, n > 16 ? ", ..." : "", topic, size - n, size),
                            std::move(silent));
  }
  GroupVerdict v;
  // "R" (rank R published its failure), then ";lost R" for each rank whose
  // process ended (the store appends it when its connection closes): the
  // first one decides.
  const std::string all = to_string(store.get(failed_key(topic), dl.wait_left()));
  const bool lost = all.starts_with(";lost ");
  const bool gave_up = all.starts_with(";timeout ");
  const std::size_t from = lost ? 6 : gave_up ? 9 : 0;
  const std::string who = all.substr(from, all.find(';', from) - from);
  const bool number = !who.empty() && who.size() < 10 &&
                      std::all_of(who.begin(), who.end(), [](char c) { return c >= '0' && c <= '9'; });
  v.failed_rank = number ? std::stoi(who) : size;
  v.gave_up = gave_up && number && v.failed_rank < size;
  v.lost = lost && number && v.failed_rank < size;
  if (!number || v.failed_rank >= size) {
    v.failure = fmt::format("an unreadable failure '{}' was published", all);
  } else if (lost) {
    v.failure = "its process ended (its connection to the store closed) before every rank had arrived";
  } else if (gave_up) {
    v.failure =
        fmt::format("it timed out waiting for the others ({} ms) before every rank had arrived", dl.budget().count());
  } else {
    const Verdict failed = decode(to_string(store.get(fmt::format("{}/{}", topic, v.failed_rank), dl.wait_left())));
    v.failure = failed.text;
    v.gave_up = failed.timed_out;
  }
  return v;
}

void agree_together(Store& store, std::string_view topic, int rank, int size, const Deadline& dl, std::string_view what,
                    const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception& e) {
    // Tell the others first; our own error is the one to raise here.
    try {
      publish(store, topic, rank, Verdict::error(e.what(), dynamic_cast<const TimeoutError*>(&e) != nullptr));
    } catch (const std::exception&) {
    }
    throw;
  }
  const GroupVerdict v = agree(store, topic, rank, size, Verdict::value(""), dl);
  if (!v.ok()) {
    std::string text =
        fmt::format("rank {} could not {}, so rank {} stops too: {}", v.failed_rank, what, rank, v.failure);
    if (v.gave_up) throw AgreementTimedOut(text, {});
    throw ConfigError(text);
  }
}

std::vector<std::string> run_together(Store& store, std::string_view topic, int rank, int size, const Deadline& dl,
                                      std::string_view what, const std::function<std::string()>& step) {
  Verdict mine;
  std::exception_ptr failed;
  try {
    mine = Verdict::value(step());
  } catch (const std::exception& e) {
    mine = Verdict::error(e.what());
    failed = std::current_exception();
  }
  if (failed) {
    // Tell the others first; our own error is the one to raise here.
    try {
      publish(store, topic, rank, mine);
    } catch (const std::exception&) {
    }
    std::rethrow_exception(failed);
  }
  const RankVerdicts all = exchange_verdicts(store, topic, rank, size, mine, dl);
  if (const int r = all.first_failed(); r >= 0) {
    throw ConfigError(fmt::format("rank {} could not {}, so rank {} stops too: {}", r, what, rank,
                                  all.of_rank[static_cast<std::size_t>(r)].text));
  }
  std::vector<std::string> values;
  values.reserve(all.of_rank.size());
  for (const auto& v : all.of_rank) values.push_back(v.text);
  return values;
}

}  // namespace mci
