#include "store/decide_once.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mci {

DecideOnce::DecideOnce(Store& store, Terms terms) : store_(store), terms_(std::move(terms)) {}

std::int64_t DecideOnce::arrive(std::string_view records) {
  // The list first, then the count: a count of k means k arrivals listed.
  store_.append(arrived_key(), to_bytes(records));
  return store_.add(count_key(), 1);
}

std::int64_t DecideOnce::count() { return store_.add(count_key(), 0); }

std::string DecideOnce::arrivals() {
  // An append of nothing reads the list without waiting for it to exist.
  std::string bytes = to_string(store_.append(arrived_key(), {}));
  (void)records::decode_list(bytes, key_text(arrived_key()));
  return bytes;
}

std::string DecideOnce::checked_decision(std::string bytes) const {
  if (records::decode_list(bytes, key_text(decision_key())).empty()) {
    throw records::RecordError(
        fmt::format("{}: an empty decision ({} is one record or more)", key_text(decision_key()), terms_.decision));
  }
  return bytes;
}

std::string DecideOnce::decide(std::string_view decision) {
  // An empty value is what compare_set reads as "no decision yet".
  if (decision.empty()) {
    throw Error(fmt::format("{}: deciding nothing ({})", terms_.decision, key_text(decision_key())));
  }
  return checked_decision(to_string(store_.compare_set(decision_key(), {}, to_bytes(decision))));
}

std::optional<std::string> DecideOnce::decision(std::chrono::milliseconds wait) {
  if (wait.count() <= 0) {
    // Some stores read a wait of 0 as "forever": look only.
    if (!store_.check({decision_key()})) return std::nullopt;
  } else {
    try {
      store_.wait({decision_key()}, wait);
    } catch (const TimeoutError&) {
      return std::nullopt;
    }
  }
  return checked_decision(to_string(store_.get(decision_key(), std::max(wait, std::chrono::milliseconds(1)))));
}

std::string DecideOnce::await(const Deadline& dl, const std::vector<std::string>& expected) {
  const Propose never = [](bool) { return std::optional<std::string>(); };
  return settle(dl, dl.budget(), never, expected);
}

std::string DecideOnce::settle(const Deadline& dl, std::chrono::milliseconds slice, const Propose& propose,
                               const std::vector<std::string>& expected) {
  while (true) {
    // Taken once per round: a proposal that saw time left is waited on once
    // more, and the last one is made before the error, never after.
    const bool last = dl.expired();
    if (std::optional<std::string> mine = propose(last)) return decide(*mine);
    if (last) throw timed_out(dl, expected);
    if (auto fixed = decision(std::min(slice, dl.wait_left()))) return *std::move(fixed);
  }
}

std::string DecideOnce::roll_call(const std::vector<std::string>& expected) {
  std::vector<std::string> came;
  try {
    for (const records::Record& r :
         records::decode_list(to_string(store_.append(arrived_key(), {})), key_text(arrived_key()))) {
      std::string name = terms_.who ? terms_.who(r) : fmt::format("an arrival of kind '{}'", r.kind);
      if (!name.empty() && std::find(came.begin(), came.end(), name) == came.end()) came.push_back(std::move(name));
    }
  } catch (const Error& e) {
    // The message is for a timeout already: it says what it could not read.
    return fmt::format("the arrivals could not be read ({})", e.what());
  }
  std::string out = came.empty() ? "nobody arrived" : fmt::format("arrived: {}", fmt::join(came, ", "));
  std::vector<std::string> missing;
  for (const auto& e : expected) {
    if (std::find(came.begin(), came.end(), e) == came.end()) missing.push_back(e);
  }
  if (!missing.empty()) out += fmt::format("; missing: {}", fmt::join(missing, ", "));
  return out;
}

TimeoutError DecideOnce::timed_out(const Deadline& dl, const std::vector<std::string>& expected) {
  return TimeoutError(fmt::format("Timed out waiting {} ms for {} ({}); in {}, {}; {}", dl.budget().count(),
                                  terms_.decision, key_text(decision_key()), key_text(arrived_key()),
                                  roll_call(expected), terms_.remedy));
}

}  // namespace mci
