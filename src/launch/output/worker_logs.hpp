// Where each process's stdout and stderr go, as torchrun's --log-dir,
// -r/--redirects, -t/--tee, --local-ranks-filter, --log-line-prefix-template
// and --duplicate-std{out,err}-filters say (torchrun's DefaultLogsSpecs):
//   LOG_DIR/RUN_ID_XXXXXX/attempt_0/LOCAL_RANK/stdout.log   (-r/-t 1 or 3)
//   LOG_DIR/RUN_ID_XXXXXX/attempt_0/LOCAL_RANK/stderr.log   (-r/-t 2 or 3)
//   LOG_DIR/RUN_ID_XXXXXX/attempt_0/LOCAL_RANK/error.json   (TORCHELASTIC_ERROR_FILE)
//   LOG_DIR/RUN_ID_XXXXXX/attempt_0/filtered_stdout.log     (--duplicate-stdout-filters)
// A redirected stream goes to its file only; a tee'd one to its file and
// the console. The files hold the bytes as the program wrote them; the
// console gets whole lines, relayed by mcirun.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mci::launch {

inline constexpr int kStdOut = 1;
inline constexpr int kStdErr = 2;

// One -r or -t value: 0 (none), 1 (stdout), 2 (stderr), 3 (both) for every
// local rank, or LOCAL_RANK:N,... (local ranks not named get 0).
struct StdStreams {
  int all = 0;
  std::map<int, int> by_rank;
  bool is_map = false;
  int of(int local_rank) const;
  bool any() const { return all != 0 || !by_rank.empty(); }
};

// named: how messages name the option ("-r/--redirects", "PET_TEE").
// Throws UsageError.
StdStreams parse_std_streams(const std::string& named, const std::string& text);
// --local-ranks-filter: "0,1,2"; "" is no filter (every rank shown).
std::set<int> parse_local_ranks(const std::string& named, const std::string& text);
// torchrun's comma list, where ",," stands for a comma.
std::vector<std::string> parse_filters(const std::string& text);

// Python's string.Template.safe_substitute over ${role_name}, ${rank},
// ${local_rank} and ${hostname} ($name too; $$ is $; anything else stays).
std::string render_prefix(const std::string& tmpl, const std::string& role, int rank, int local_rank,
                          const std::string& host);

struct LogOptions {
  std::optional<std::string> log_dir;
  StdStreams redirects;
  StdStreams tee;
  std::set<int> console_ranks;  // empty: every local rank
  // --log-line-prefix-template, else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE.
  std::optional<std::string> prefix_template;
  std::vector<std::string> stdout_filters;
  std::vector<std::string> stderr_filters;

  // A log folder is made (with --log-dir, or for -r/-t without it).
  bool wants_folder() const { return log_dir.has_value() || redirects.any() || tee.any(); }
};

// What one stream of one rank goes to.
struct StreamPlan {
  bool console = true;
  std::string prefix;           // of each console line
  std::string file;             // its log file, or ""
  std::string filtered_file;    // lines holding one of `filters` also go there,
  std::string filtered_prefix;  // after this (torchrun's header of the rank)
  std::vector<std::string> filters;
};

struct RankStreams {
  StreamPlan out;
  StreamPlan err;
};

struct RankLabel {
  std::string role;
  int rank = 0;
  int local_rank = 0;
  std::string host;
};

// attempt_dir: the rank's folders' parent, "" without a log folder.
// rank_prefix: mcirun --prefix.
RankStreams plan_streams(const LogOptions& o, const std::string& attempt_dir, const RankLabel& who, bool rank_prefix);

// The folders of this node's logs, made at once: base/RUN_ID_XXXXXX/
// attempt_0/ and one folder per local rank in it (attempt_N/ at restart N). base: --log-dir (made
// when missing), else a fresh folder under $TMPDIR. Throws ConfigError when
// they cannot be made. Kept after the job: the logs are the user's.
class LogFolders {
 public:
  LogFolders(const std::optional<std::string>& base, const std::string& run_id, int nproc);

  const std::string& run_dir() const { return run_dir_; }
  const std::string& attempt_dir() const { return attempt_dir_; }
  // attempt_N/ and its per-rank folders, for the restart N (--max-restarts),
  // as torchrun lays them out; its path. Throws ConfigError.
  std::string make_attempt(int attempt);

 private:
  std::string run_dir_;
  int nproc_ = 0;
  std::string attempt_dir_;
};

// TORCHELASTIC_ERROR_FILE of a local rank in an attempt folder.
std::string log_error_file(const std::string& attempt_dir, int local_rank);

}  // namespace mci::launch
