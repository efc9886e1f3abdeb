// What rank 0 prints and writes: nccl-tests' banner, columns and footer (the
// layout of current nccl-tests, src/util.cu), one summary line of mci's own
// for scripts, and the same results as JSON (nccl-tests' -J keys plus mci's)
// and CSV.
#pragma once

#include <string>
#include <vector>

#include "perf/options.hpp"
#include "perf/result.hpp"

namespace mci::perf {

struct RankInfo {
  int rank = 0;
  long pid = 0;
  std::string host;
  std::string device = "cpu";  // "cpu" or "cuda:N"
};

// nccl-tests' device number of a rank: N for cuda:N, -1 for host memory.
int device_number(const RankInfo& r);

// Everything the report says about the run besides its rows.
struct RunInfo {
  Options options;
  int ranks = 1;
  std::string transport = "auto";  // --transport, else MCI_TRANSPORT, else auto
  std::string algo = "auto";       // --algo, else MCI_ALGO, else auto
  std::vector<RankInfo> devices;
  std::string version;
  std::string start_time;  // local time, "YYYY-MM-DD HH:MM:SS"
  std::string end_time;
  // The variables that steer the run ("NAME=value": MCI_*, NCCL_*, ...,
  // never MCI_JOB_TOKEN), for the JSON's "env".
  std::vector<std::string> env;
};

// A number in `width` characters, with as many decimals as fit (two at
// most), as nccl-tests prints its columns.
std::string format_number(double value, int width);

// The lines before the table: mci's line, nccl-tests' "Collective test
// starting" and parameter lines, and the ranks.
std::string banner(const RunInfo& info);
// The three header lines of the table.
std::string table_header(const RunInfo& info);
std::string format_row(const RunInfo& info, const Row& row);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth : X", and
// "# Collective test concluded: PROGRAM".
std::string footer(const RunInfo& info, const Totals& totals);
// One line for scripts, e.g. "# mci-perf summary: collective=all_reduce
// backend=cpu ... avg_busbw_GBps=1.2345 wrong=0 status=OK".
std::string summary_line(const RunInfo& info, const Totals& totals, std::size_t rows);

std::string to_json(const RunInfo& info, const std::vector<Row>& rows, const Totals& totals);
// One line per row and placement, with a header.
std::string to_csv(const RunInfo& info, const std::vector<Row>& rows);

}  // namespace mci::perf
