#include "perf/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "mci/init.hpp"
#include "perf/collective.hpp"
#include "perf/layout.hpp"

namespace mci::perf {

namespace {

std::string redop_column(OpKind c, ReduceOp op) { return uses_reduce_op(c) ? std::string(reduce_op_name(op)) : "none"; }

int root_column(const Options& o) { return uses_root(o.collective) ? o.root : -1; }

std::string wrong_text(const std::optional<std::uint64_t>& w) { return w ? std::to_string(*w) : "N/A"; }

std::string cell_text(const std::optional<Cell>& c, bool cputime) {
  if (!c) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
  return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", format_number(cputime ? c->cpu_time_us : c->time_us, 7),
                     format_number(c->bw.algbw_GBps, 6), format_number(c->bw.busbw_GBps, 6), wrong_text(c->wrong));
}

// nccl-tests writes its booleans as the strings "true" and "false".
const char* json_bool(bool b) { return b ? "true" : "false"; }

// nccl-tests' keys (time or cpu_time, alg_bw, bus_bw, nwrong), then mci's.
nlohmann::ordered_json cell_json(const std::optional<Cell>& c, bool cputime) {
  if (!c) return nullptr;
  nlohmann::ordered_json j;
  j[cputime ? "cpu_time" : "time"] = cputime ? c->cpu_time_us : c->time_us;
  j["alg_bw"] = c->bw.algbw_GBps;
  j["bus_bw"] = c->bw.busbw_GBps;
  j["nwrong"] = c->wrong ? nlohmann::ordered_json(*c->wrong) : nlohmann::ordered_json(nullptr);
  j["time_us"] = c->time_us;
  j["cpu_time_us"] = c->cpu_time_us;
  j["algbw_GBps"] = c->bw.algbw_GBps;
  j["busbw_GBps"] = c->bw.busbw_GBps;
  j["wrong"] = c->wrong ? nlohmann::ordered_json(*c->wrong) : nlohmann::ordered_json(nullptr);
  return j;
}

std::string step_text(const SweepSpec& s) {
  return s.step_bytes > 0 ? fmt::format("{}(bytes)", s.step_bytes) : fmt::format("{}(factor)", s.step_factor);
}

std::string device_hex(const RankInfo& r) { return r.device; }

std::string device_info(const RankInfo& r) {
  return device_number(r) < 0 ? "host memory" : "CUDA device " + std::to_string(device_number(r));
}

std::string types_text(const Options& o) {
  std::string s;
  for (DType t : o.dtypes) s += (s.empty() ? "" : ",") + std::string(dtype_name(t));
  return s;
}

std::string ops_text(const Options& o) {
  if (!uses_reduce_op(o.collective)) return "none";
  std::string s;
  for (ReduceOp op : o.ops) s += (s.empty() ? "" : ",") + std::string(reduce_op_name(op));
  return s;
}

}  // namespace

int device_number(const RankInfo& r) {
  if (r.device.rfind("cuda:", 0) != 0) return -1;
  return std::atoi(r.device.c_str() + 5);
}

std::string format_number(double value, int width) {
  if (!std::isfinite(value)) return fmt::format("{:>{}}", "N/A", width);
  // Digits before the decimal point decide how many decimals still fit.
  int digits = 0;
  for (double v = 1; value >= v && digits < 40; v *= 10) ++digits;
  if (digits < width - 2) return fmt::format("{:>{}.2f}", value, width);
  if (digits < width - 1) return fmt::format("{:>{}.1f}", value, width);
  if (digits < width + 1) return fmt::format("{:>{}.0f}", value, width);
  return fmt::format("{:>{}.1e}", value, width);
}

std::string banner(const RunInfo& info) {
  const Options& o = info.options;
  std::string s;
  // nccl-tests' first line names its version and NCCL's; this one names
  // mci's and what steers it.
  s += fmt::format("# mci-perf version {}: {}  backend {}  transport {}  algo {}  ranks {}  time: {} over ranks\n",
                   info.version, collective_name(o.collective), o.backend, info.transport, info.algo, info.ranks,
                   average_name(o.average));
  s += fmt::format("# Collective test starting: {}\n", nccl_program_name(o.collective));
  s += fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: {} "
      "validation: {} graph: 0 unalign: 0\n",
      o.nthreads, o.ngpus, o.sweep.min_bytes, o.sweep.max_bytes, step_text(o.sweep), o.warmup, o.iters, o.agg_iters,
      o.check);
  if (o.blocking) {
    s += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
  } else {
    s += "# Non-blocking: each batch is issued with Exec::async and waited at its end\n";
  }
  s += "#\n# Using devices\n";
  for (const RankInfo& r : info.devices) {
    s += fmt::format("#  Rank {:>2} Group {:>2} Pid {:>6} on {:>10} device {:>2} [{}] {}\n", r.rank, 0, r.pid, r.host,
                     device_number(r), device_hex(r), device_info(r));
  }
  return s;
}

std::string table_header(const RunInfo& info) {
  const Options& o = info.options;
  const bool ref = o.barrier_ref;
  const char* time = o.report_cputime ? "cputime" : "time";
  const int ts_pad = o.report_timestamps ? 19 : 0;
  // The rows' barrier column is 12 wide after the timestamp (21 wide, its
  // header 20) or after #wrong (whose header line already ends in a space).
  auto ref_column = [&](const char* text) {
    return ref ? fmt::format("{}{:>10}", o.report_timestamps ? "   " : " ", text) : std::string();
  };
  std::string s = "#\n";
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          {}\n", "",
      "", "", "", "", ref ? "  reference" : "");
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} {:>{}}{}\n",
      "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong",
      o.report_timestamps ? "timestamp" : "", ts_pad, ref_column("barrier_us"));
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} {:>{}}{}\n", "(B)",
      "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
      o.report_timestamps ? "%Y-%m-%d %H:%M:%S" : "", ts_pad, ref_column("(us)"));
  return s;
}

std::string format_row(const RunInfo& info, const Row& row) {
  const Options& o = info.options;
  std::string s = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.bytes, row.count, nccl_type_name(row.dtype),
                              redop_column(o.collective, row.op), root_column(o));
  s += cell_text(row.out_of_place, o.report_cputime);
  s += cell_text(row.in_place, o.report_cputime);
  if (o.report_timestamps) s += fmt::format("{:>21}", row.timestamp);
  if (o.barrier_ref) {
    s += fmt::format("  {:>10}", row.barrier_us ? format_number(*row.barrier_us, 10) : std::string("N/A"));
  }
  return s + "\n";
}

std::string footer(const RunInfo& info, const Totals& totals) {
  const std::uint64_t wrong = totals.wrong.value_or(0);
  std::string s;
  s += fmt::format("# {:<20} : {} {}\n", "Out of bounds values", wrong, wrong ? "FAILED" : "OK");
  s += fmt::format("# {:<20} : {:g} \n", "Avg bus bandwidth", totals.avg_busbw_GBps);
  s += "#\n";
  s += fmt::format("# Collective test concluded: {}\n", nccl_program_name(info.options.collective));
  s += "#\n";
  return s;
}

std::string summary_line(const RunInfo& info, const Totals& totals, std::size_t rows) {
  const Options& o = info.options;
  return fmt::format(
      "# mci-perf summary: collective={} backend={} transport={} algo={} ranks={} dtype={} op={} root={} "
      "blocking={} sizes={} min_bytes={} max_bytes={} avg_time_us={:.3f} avg_busbw_GBps={:.4f} "
      "peak_busbw_GBps={:.4f} wrong={} status={}\n",
      collective_name(o.collective), o.backend, info.transport, info.algo, info.ranks, types_text(o), ops_text(o),
      root_column(o), o.blocking ? 1 : 0, rows, o.sweep.min_bytes, o.sweep.max_bytes, totals.avg_time_us,
      totals.avg_busbw_GBps, totals.peak_busbw_GBps, wrong_text(totals.wrong), totals.ok() ? "OK" : "FAILED");
}

std::string to_json(const RunInfo& info, const std::vector<Row>& rows, const Totals& totals) {
  const Options& o = info.options;
  nlohmann::ordered_json j;
  // nccl-tests' keys first (its -J file, version 2), in its order.
  j["version"] = 2;
  j["start_time"] = info.start_time;
  j["args"] = o.argv;
  j["env"] = info.env;
  j["nccl_version"] = 0;  // mci-perf does not run on NCCL's test harness; mci_version says what ran
  nlohmann::ordered_json cfg;
  cfg["nthreads"] = o.nthreads;
  cfg["ngpus"] = o.ngpus;
  cfg["minimum_bytes"] = o.sweep.min_bytes;
  cfg["maximum_bytes"] = o.sweep.max_bytes;
  if (o.sweep.step_bytes > 0) {
    cfg["step_bytes"] = o.sweep.step_bytes;
  } else {
    cfg["step_factor"] = o.sweep.step_factor;
  }
  cfg["warmup_iters"] = o.warmup;
  cfg["iterations"] = o.iters;
  cfg["aggregated_iterations"] = o.agg_iters;
  cfg["validation"] = o.check;
  cfg["graph"] = 0;
  cfg["blocking_collectives"] = json_bool(o.blocking);
  cfg["per_iter_timing"] = json_bool(false);
  cfg["parallel_init"] = json_bool(false);
  cfg["devices"] = nlohmann::ordered_json::array();
  for (const RankInfo& r : info.devices) {
    cfg["devices"].push_back({{"rank", r.rank},
                              {"group", 0},
                              {"pid", r.pid},
                              {"hostname", r.host},
                              {"device", device_number(r)},
                              {"device_hex", device_hex(r)},
                              {"device_info", device_info(r)}});
  }
  // mci's own configuration.
  cfg["min_bytes"] = o.sweep.min_bytes;
  cfg["max_bytes"] = o.sweep.max_bytes;
  cfg["iters"] = o.iters;
  cfg["check_iters"] = o.check;
  cfg["blocking"] = o.blocking;
  cfg["average"] = average_name(o.average);
  cfg["timeout_s"] = std::chrono::duration<double>(o.timeout).count();
  cfg["barrier_ref"] = o.barrier_ref;
  cfg["run_cycles"] = o.run_cycles;
  cfg["report_cputime"] = o.report_cputime;
  j["config"] = cfg;
  j["results"] = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    nlohmann::ordered_json row;
    row["size"] = r.bytes;
    row["count"] = r.count;
    row["type"] = nccl_type_name(r.dtype);
    row["redop"] = redop_column(o.collective, r.op);
    row["root"] = fmt::format("{:>6}", root_column(o));  // nccl-tests writes the printed column, a string
    row["out_of_place"] = cell_json(r.out_of_place, o.report_cputime);
    row["in_place"] = cell_json(r.in_place, o.report_cputime);
    row["actual_iterations"] = o.iters;
    row["experiment_name"] = "";
    row["dtype"] = dtype_name(r.dtype);
    row["barrier_us"] = r.barrier_us ? nlohmann::ordered_json(*r.barrier_us) : nlohmann::ordered_json(nullptr);
    if (o.report_timestamps) row["timestamp"] = r.timestamp;
    j["results"].push_back(row);
  }
  const std::uint64_t wrong = totals.wrong.value_or(0);
  j["out_of_bounds"] = {{"count", wrong}, {"okay", json_bool(wrong == 0)}};
  j["average_bus_bandwidth"] = {{"bandwidth", totals.avg_busbw_GBps}, {"okay", "unchecked"}};
  j["errors"] = nlohmann::ordered_json::array();
  // mci's record of the run, as before.
  j["tool"] = "mci-perf";
  j["mci_version"] = info.version;
  j["collective"] = collective_name(o.collective);
  j["backend"] = o.backend;
  // Whether the backend moves data between devices over their own links
  // (NVLink, PCIe peer to peer), from its row: mci-topo check --perf then
  // compares with the ring through those links, else with host memory.
  const auto caps = find_backend_info(o.backend);
  j["device_links"] = caps && caps->caps.gpu_per_rank;
  j["transport"] = info.transport;
  j["algo"] = info.algo;
  j["ranks"] = info.ranks;
  j["dtype"] = types_text(o);
  j["type"] = nccl_type_name(o.dtypes.front());
  j["op"] = ops_text(o);
  j["root"] = root_column(o);
  j["devices"] = nlohmann::ordered_json::array();
  for (const RankInfo& r : info.devices) {
    j["devices"].push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}, {"device", r.device}});
  }
  j["wrong"] = totals.wrong ? nlohmann::ordered_json(*totals.wrong) : nlohmann::ordered_json(nullptr);
  j["ok"] = totals.ok();
  j["avg_busbw_GBps"] = totals.avg_busbw_GBps;
  j["peak_busbw_GBps"] = totals.peak_busbw_GBps;
  j["avg_time_us"] = totals.avg_time_us;
  j["end_time"] = info.end_time;
  return j.dump(2) + "\n";
}

std::string to_csv(const RunInfo& info, const std::vector<Row>& rows) {
  const Options& o = info.options;
  std::string s =
      "collective,backend,transport,algo,ranks,size,count,type,redop,root,placement,time_us,algbw_GBps,"
      "busbw_GBps,wrong,barrier_us\n";
  auto line = [&](const Row& r, const char* placement, const Cell& c) {
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.6f},{:.6f},{},{}\n", collective_name(o.collective),
                     o.backend, info.transport, info.algo, info.ranks, r.bytes, r.count, dtype_name(r.dtype),
                     redop_column(o.collective, r.op), root_column(o), placement, c.time_us, c.bw.algbw_GBps,
                     c.bw.busbw_GBps, c.wrong ? std::to_string(*c.wrong) : "",
                     r.barrier_us ? fmt::format("{:.3f}", *r.barrier_us) : "");
  };
  for (const Row& r : rows) {
    if (r.out_of_place) line(r, "out_of_place", *r.out_of_place);
    if (r.in_place) line(r, "in_place", *r.in_place);
  }
  return s;
}

}  // namespace mci::perf
