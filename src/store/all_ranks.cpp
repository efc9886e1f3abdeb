#include "store/all_ranks.hpp"

#include <exception>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

namespace {
constexpr std::string_view kOk = "ok:";
constexpr std::string_view kError = "error:";

std::string encode(const Verdict& v) { return std::string(v.ok ? kOk : kError) + v.text; }

void publish(Store& store, std::string_view topic, int rank, const Verdict& v) {
  store.compare_set(fmt::format("{}/{}", topic, rank), {}, to_bytes(encode(v)));
}

Verdict decode(const std::string& s) {
  if (s.starts_with(kOk)) return Verdict::value(s.substr(kOk.size()));
  if (s.starts_with(kError)) return Verdict::error(s.substr(kError.size()));
  return Verdict::error(fmt::format("published an unreadable verdict '{}'", s));
}
}  // namespace

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
  RankVerdicts all;
  all.of_rank.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    all.of_rank.push_back(decode(to_string(store.get(fmt::format("{}/{}", topic, r), dl.wait_left()))));
    if (!all.of_rank.back().ok) break;
  }
  return all;
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
