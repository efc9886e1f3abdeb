#include "perf/app.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "perf/host_ops.hpp"
#include "perf/options.hpp"
#include "perf/report.hpp"
#include "perf/runner.hpp"

#ifndef MCI_PERF_VERSION
#define MCI_PERF_VERSION "dev"
#endif

namespace mci::perf {

namespace {

// Before the group exists, RANK from the launcher says who prints: a bad
// flag is reported once, not once per rank.
bool launched_as_rank0() {
  const char* r = std::getenv("RANK");
  return r == nullptr || std::strcmp(r, "0") == 0;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// What the JSON's "env" lists: the variables that steer mci and the job
// (nccl-tests lists its whole environment); never the job's secret.
std::vector<std::string> steering_env() {
  static constexpr std::string_view kPrefixes[] = {"MCI_", "NCCL_", "GLOO_", "OMP_", "CUDA_"};
  static constexpr std::string_view kNames[] = {"RANK",        "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name == "MCI_JOB_TOKEN") continue;
    const bool wanted = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](std::string_view p) { return name.starts_with(p); }) ||
                        std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
    if (wanted) out.emplace_back(entry);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%d %H:%M:%S", &tm);
  return buf.data();
}

// Every rank's pid and host, gathered in rank order for the banner.
std::vector<RankInfo> gather_ranks(ProcessGroup& pg, Device where) {
  constexpr std::size_t kRecord = 128;
  std::array<char, 64> host{};
  ::gethostname(host.data(), host.size() - 1);
  std::vector<std::uint8_t> mine(kRecord, 0), all(kRecord * static_cast<std::size_t>(pg.size()), 0);
  const std::string device = where.is_cuda() ? "cuda:" + std::to_string(where.index) : "cpu";
  const std::string text = std::to_string(static_cast<long>(::getpid())) + " " + device + " " + host.data();
  std::memcpy(mine.data(), text.data(), std::min(text.size(), kRecord - 1));
  host_all_gather(pg, view(mine), view(all));
  std::vector<RankInfo> out;
  for (int r = 0; r < pg.size(); ++r) {
    const std::string rec(reinterpret_cast<const char*>(all.data() + r * kRecord));
    RankInfo info;
    info.rank = r;
    const auto space = rec.find(' ');
    const auto second = space == std::string::npos ? space : rec.find(' ', space + 1);
    info.pid = std::strtol(rec.c_str(), nullptr, 10);
    info.device = second == std::string::npos ? "?" : rec.substr(space + 1, second - space - 1);
    info.host = second == std::string::npos ? "?" : rec.substr(second + 1);
    out.push_back(info);
  }
  return out;
}

// Opens rank 0's output files before the sweep, so a bad path fails in a
// second instead of after the whole run. Every rank learns the outcome.
struct Outputs {
  std::ofstream json, csv;
  std::string error;
};

Outputs open_outputs(ProcessGroup& pg, const Options& o) {
  Outputs f;
  if (pg.rank() == 0) {
    auto open = [&](std::ofstream& s, const std::string& path, const char* flag) {
      if (path.empty() || !f.error.empty()) return;
      s.open(path, std::ios::out | std::ios::trunc);
      if (!s) f.error = std::string(flag) + " " + path + ": cannot write this file (" + std::strerror(errno) + ")";
    };
    open(f.json, o.json_path, "--json");
    open(f.csv, o.csv_path, "--csv");
  }
  std::int32_t failed = f.error.empty() ? 0 : 1;
  host_all_reduce(pg, BufferView{&failed, 1, DType::i32}, ReduceOp::max);
  if (failed && f.error.empty()) f.error = "rank 0 could not open its output files";
  return f;
}

int run(const Options& o, std::ostream& out, std::ostream& err) {
  RunInfo info;
  info.options = o;
  info.transport = o.transport.value_or(env_or("MCI_TRANSPORT", "auto"));
  info.algo = o.algo.value_or(env_or("MCI_ALGO", "auto"));
  info.version = MCI_PERF_VERSION;
  info.start_time = now_text();

  InitOptions init;
  init.backend = o.backend;
  init.timeout = o.timeout;
  // The flags are the group's settings; the environment stays the fallback.
  if (o.transport) init.settings["MCI_TRANSPORT"] = *o.transport;
  if (o.algo) init.settings["MCI_ALGO"] = *o.algo;
  // Started alone, as nccl-tests can be: a job of one rank on a store of
  // its own.
  std::unique_ptr<StoreServer> own_store;
  if (!launched_as_a_job()) {
    own_store = std::make_unique<StoreServer>(StoreServerOptions{"127.0.0.1", 0, ""});
    init.store = StoreAddress{"127.0.0.1", own_store->port(), ""}.connect(o.timeout);
    init.rank = 0;
    init.world_size = 1;
  }
  auto pg = init_process_group(init);
  const bool printer = pg->rank() == 0;
  info.ranks = pg->size();

  // The options are checked against the group on every rank with the same
  // outcome, so all ranks stop together. Rank 0 prints first, then a
  // barrier: a launcher tearing the job down when the first rank exits
  // must not kill rank 0 before its message is out.
  std::optional<Runner> runner;
  std::string refused;
  try {
    runner.emplace(*pg, o);
  } catch (const UsageError& e) {
    refused = e.what();
  }
  Outputs files;
  if (refused.empty()) {
    files = open_outputs(*pg, o);
    refused = files.error;
  }
  if (!refused.empty()) {
    if (printer) err << "mci-perf: " << refused << std::endl;
    pg->barrier();
    return 2;
  }

  info.env = steering_env();
  if (printer) {
    if (files.json.is_open()) out << "# Writing JSON output to " << o.json_path << "\n";
    for (const std::string& n : o.notices) err << "mci-perf: note: " << n << "\n";
  }
  info.devices = gather_ranks(*pg, runner->device());
  if (printer) out << banner(info) << table_header(info) << std::flush;
  // -d all and -o all: every type, and for each every op, in turn (nccl-tests'
  // order); -N: the whole sweep again, each row printed.
  std::vector<Row> rows;
  DType runner_type = o.dtype;
  ReduceOp runner_op = o.op;
  for (int cycle = 0; o.run_cycles == 0 || cycle < o.run_cycles; ++cycle) {
    for (DType t : o.dtypes) {
      for (ReduceOp op : o.ops) {
        if (t != runner_type || op != runner_op) {
          Options each = o;
          each.dtype = t;
          each.op = op;
          runner.reset();  // one set of buffers at a time
          runner.emplace(*pg, each);
          runner_type = t;
          runner_op = op;
        }
        for (std::size_t i = 0; i < runner->sizes().size(); ++i) {
          rows.push_back(runner->run(i));
          if (o.report_timestamps) rows.back().timestamp = now_text();
          if (printer) out << format_row(info, rows.back()) << std::flush;
        }
      }
    }
  }
  const Totals totals = summarize(rows);
  info.end_time = now_text();
  bool written = true;
  if (printer) {
    out << footer(info, totals) << summary_line(info, totals, rows.size()) << std::flush;
    if (files.json.is_open()) files.json << to_json(info, rows, totals);
    if (files.csv.is_open()) files.csv << to_csv(info, rows);
    for (auto* f : {&files.json, &files.csv}) {
      if (f->is_open() && !f->flush()) written = false;
    }
    // A script reading the file must not take a truncated one for a result.
    if (!written) err << "mci-perf: writing the --json or --csv file failed (disk full?)\n";
  }
  return totals.ok() && written ? 0 : 1;
}

}  // namespace

int perf_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err, const StartRanks& start) {
  Options o;
  try {
    ParseOutcome parsed = parse_options(argv);
    if (auto* exit = std::get_if<ExitRequest>(&parsed)) {
      if (launched_as_rank0()) out << exit->text;
      return exit->code;
    }
    o = std::get<Options>(std::move(parsed));
    // -g N -t M, as nccl-tests drives N x M GPUs from one process: here N x M
    // processes of one rank each, started through mcirun's launcher.
    const int wanted = o.ranks_to_start();
    if (wanted > 1 && std::getenv(kStartedRanksVar) == nullptr) {
      const std::string flags = "-g " + std::to_string(o.ngpus) + " -t " + std::to_string(o.nthreads);
      if (launched_as_a_job()) {
        const char* world = std::getenv("WORLD_SIZE");
        throw UsageError(flags + " asks mci-perf to start " + std::to_string(wanted) +
                         " ranks itself, but this process is already a rank of a job a launcher started (WORLD_SIZE=" +
                         (world ? world : "?") +
                         "): drop -g/-t and give the launcher the number of ranks "
                         "(mcirun --nproc_per_node=" +
                         std::to_string(wanted) + "), or run mci-perf alone with " + flags);
      }
      if (!start)
        throw UsageError(
            flags + ": this mci-perf cannot start ranks itself; use mcirun --nproc_per_node=" + std::to_string(wanted));
      ::setenv(kStartedRanksVar, std::to_string(wanted).c_str(), 1);
      return start(wanted, argv);
    }
  } catch (const UsageError& e) {
    // Every rank sees the same bad command line; one message is enough.
    // The others linger a moment before exiting: a launcher tears the job
    // down when the first rank exits, and rank 0 must get its line out.
    if (launched_as_rank0()) {
      err << "mci-perf: " << e.what() << std::endl;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return 2;
  }
  try {
    return run(o, out, err);
  } catch (const ConfigError& e) {
    // A setting mci refused at init (MCI_ALGO, the backend, the
    // environment): the same on every rank, so each says it once.
    const char* r = std::getenv("RANK");
    err << "mci-perf: rank " << (r ? r : "0") << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Every rank says what it saw: the first failure names the cause, the
    // others (peer closed) name who went away.
    const char* r = std::getenv("RANK");
    err << "mci-perf: rank " << (r ? r : "0") << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace mci::perf
