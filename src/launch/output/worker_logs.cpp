#include "launch/output/worker_logs.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "common/env.hpp"
#include "launch/config/cli.hpp"

namespace mci::launch {

namespace {

[[noreturn]] void bad_streams(const std::string& named, const std::string& whole) {
  throw UsageError(
      fmt::format("{}='{}' is not valid: give 0 (none), 1 (stdout), 2 (stderr) or 3 (both) for every local rank, "
                  "or LOCAL_RANK:N for each, e.g. 0:3,1:2",
                  named, whole));
}

int stream_bits(const std::string& named, const std::string& text, const std::string& whole) {
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3') return text[0] - '0';
  bad_streams(named, whole);
}

bool ident_char(char c, bool first) {
  return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

std::filesystem::path make_temp_dir(const std::filesystem::path& parent, const std::string& prefix) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw ConfigError(fmt::format("cannot make the log folder {}: {}", pattern, std::strerror(errno)));
  }
  return pattern;
}

}  // namespace

int StdStreams::of(int local_rank) const {
  if (!is_map) return all;
  const auto it = by_rank.find(local_rank);
  return it == by_rank.end() ? 0 : it->second;
}

StdStreams parse_std_streams(const std::string& named, const std::string& text) {
  StdStreams s;
  if (text.find(':') == std::string::npos) {
    s.all = stream_bits(named, text, text);
    return s;
  }
  s.is_map = true;
  for (const std::string& item : split_list(text)) {
    const auto colon = item.find(':');
    const auto rank = colon == std::string::npos ? std::nullopt : parse_int(item.substr(0, colon));
    if (!rank || *rank < 0 || *rank > (1 << 20)) bad_streams(named, text);
    s.by_rank[static_cast<int>(*rank)] = stream_bits(named, item.substr(colon + 1), text);
  }
  return s;
}

std::set<int> parse_local_ranks(const std::string& named, const std::string& text) {
  std::set<int> ranks;
  if (text.empty()) return ranks;
  for (const std::string& item : split_list(text)) {
    const auto r = parse_int(item);
    if (!r || *r < 0 || *r > (1 << 20)) {
      throw UsageError(
          fmt::format("{}='{}' is not valid: give a comma-separated list of local ranks, e.g. 0,1,2", named, text));
    }
    ranks.insert(static_cast<int>(*r));
  }
  return ranks;
}

std::vector<std::string> parse_filters(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  std::string item;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      item.push_back(text[i]);
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      item.push_back(',');
      ++i;
    } else {
      out.push_back(std::move(item));
      item.clear();
    }
  }
  out.push_back(std::move(item));
  return out;
}

std::string render_prefix(const std::string& tmpl, const std::string& role, int rank, int local_rank,
                          const std::string& host) {
  auto value = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "role_name") return role;
    if (name == "rank") return std::to_string(rank);
    if (name == "local_rank") return std::to_string(local_rank);
    if (name == "hostname") return host;
    return std::nullopt;
  };
  std::string out;
  std::size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] != '$' || i + 1 >= tmpl.size()) {
      out.push_back(tmpl[i++]);
      continue;
    }
    if (tmpl[i + 1] == '$') {
      out.push_back('$');
      i += 2;
      continue;
    }
    const bool braced = tmpl[i + 1] == '{';
    std::size_t j = i + (braced ? 2 : 1);
    const std::size_t name_start = j;
    while (j < tmpl.size() && ident_char(tmpl[j], j == name_start)) ++j;
    const std::string name = tmpl.substr(name_start, j - name_start);
    const bool closed = !braced || (j < tmpl.size() && tmpl[j] == '}');
    const auto v = name.empty() || !closed ? std::nullopt : value(name);
    if (!v) {
      out.push_back(tmpl[i++]);  // left as written, as safe_substitute does
      continue;
    }
    out += *v;
    i = braced ? j + 1 : j;
  }
  return out;
}

RankStreams plan_streams(const LogOptions& o, const std::string& attempt_dir, const RankLabel& who, bool rank_prefix) {
  const bool shown = o.console_ranks.empty() || o.console_ranks.count(who.local_rank) > 0;
  const std::string header = o.prefix_template
                                 ? render_prefix(*o.prefix_template, who.role, who.rank, who.local_rank, who.host)
                                 : fmt::format("[{}{}]:", who.role, who.local_rank);
  auto plan = [&](int bit, const char* file, const char* filtered, const std::vector<std::string>& filters) {
    StreamPlan p;
    const bool teed = (o.tee.of(who.local_rank) & bit) != 0;
    const bool redirected = (o.redirects.of(who.local_rank) & bit) != 0;
    p.console = shown && (teed || !redirected);
    if (o.prefix_template) {
      p.prefix = header;
    } else if (rank_prefix) {
      p.prefix = fmt::format("[rank {}] ", who.rank);
    } else if (teed) {
      p.prefix = header;  // torchrun's console lines of a tee'd stream
    }
    if (!attempt_dir.empty() && (teed || redirected)) {
      p.file = fmt::format("{}/{}/{}", attempt_dir, who.local_rank, file);
    }
    if (!attempt_dir.empty() && teed && shown && !filters.empty()) {
      p.filtered_file = fmt::format("{}/{}", attempt_dir, filtered);
      p.filtered_prefix = header;
      p.filters = filters;
    }
    return p;
  };
  return {plan(kStdOut, "stdout.log", "filtered_stdout.log", o.stdout_filters),
          plan(kStdErr, "stderr.log", "filtered_stderr.log", o.stderr_filters)};
}

LogFolders::LogFolders(const std::optional<std::string>& base, const std::string& run_id, int nproc) {
  namespace fs = std::filesystem;
  fs::path root;
  std::error_code ec;
  if (base) {
    root = *base;
    if (fs::exists(root, ec) && !fs::is_directory(root, ec)) {
      throw ConfigError(fmt::format("--log-dir={} is a file: give a folder (mcirun makes it when missing)", *base));
    }
    fs::create_directories(root, ec);
    if (ec) throw ConfigError(fmt::format("cannot make the log folder --log-dir={}: {}", *base, ec.message()));
  } else {
    const char* tmp = std::getenv("TMPDIR");
    root = make_temp_dir(tmp && *tmp ? tmp : "/tmp", "mcirun-logs-");
  }
  std::string prefix = run_id;
  for (auto& c : prefix) {
    if (c == '/') c = '_';
  }
  run_dir_ = make_temp_dir(root, prefix + "_").string();
  nproc_ = nproc;
  attempt_dir_ = make_attempt(0);
}

std::string LogFolders::make_attempt(int attempt) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(run_dir_) / fmt::format("attempt_{}", attempt);
  for (int local = -1; local < nproc_; ++local) {
    const fs::path d = local < 0 ? dir : dir / std::to_string(local);
    if (!fs::create_directory(d, ec) && ec) {
      throw ConfigError(fmt::format("cannot make the log folder {}: {}", d.string(), ec.message()));
    }
  }
  return dir.string();
}

std::string log_error_file(const std::string& attempt_dir, int local_rank) {
  return fmt::format("{}/{}/error.json", attempt_dir, local_rank);
}

}  // namespace mci::launch
