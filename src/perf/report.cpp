#include "perf/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "perf/collective.hpp"
#include "perf/layout.hpp"

namespace mci::perf {

namespace {

std::string redop_column(const Options& o) {
  return uses_reduce_op(o.collective) ? std::string(reduce_op_name(o.op)) : "none";
}

int root_column(const Options& o) { return uses_root(o.collective) ? o.root : -1; }

std::string wrong_text(const std::optional<std::uint64_t>& w) { return w ? std::to_string(*w) : "N/A"; }

std::string cell_text(const std::optional<Cell>& c) {
  if (!c) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
  return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", format_number(c->time_us, 7), format_number(c->bw.algbw_GBps, 6),
                     format_number(c->bw.busbw_GBps, 6), wrong_text(c->wrong));
}

nlohmann::ordered_json cell_json(const std::optional<Cell>& c) {
  if (!c) return nullptr;
  nlohmann::ordered_json j;
  j["time_us"] = c->time_us;
  j["algbw_GBps"] = c->bw.algbw_GBps;
  j["busbw_GBps"] = c->bw.busbw_GBps;
  j["wrong"] = c->wrong ? nlohmann::ordered_json(*c->wrong) : nlohmann::ordered_json(nullptr);
  return j;
}

std::string step_text(const SweepSpec& s) {
  return s.step_bytes > 0 ? fmt::format("{}(bytes)", s.step_bytes) : fmt::format("{}(factor)", s.step_factor);
}

}  // namespace

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
  s += fmt::format("# mci-perf {}: {}  backend {}  transport {}  algo {}  ranks {}\n", info.version,
                   collective_name(o.collective), o.backend, info.transport, info.algo, info.ranks);
  s += fmt::format(
      "# minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} validation: {} blocking: {} "
      "time: {} over ranks\n",
      o.sweep.min_bytes, o.sweep.max_bytes, step_text(o.sweep), o.warmup, o.iters, o.check, o.blocking ? 1 : 0,
      average_name(o.average));
  if (!o.blocking) s += "# Non-blocking: each batch is issued with Exec::async and waited at its end\n";
  s += "#\n# Using devices\n";
  for (const RankInfo& r : info.devices) {
    s += fmt::format("#  Rank {:>2} Pid {:>7} on {:>10} device {}\n", r.rank, r.pid, r.host, r.device);
  }
  return s;
}

std::string table_header(const RunInfo& info) {
  const bool ref = info.options.barrier_ref;
  std::string s = "#\n";
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          {}\n", "",
      "", "", "", "", ref ? "  reference" : "");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}\n",
                   "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                   "busbw", "#wrong", ref ? fmt::format("  {:>10}", "barrier_us") : "");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}\n",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
                   ref ? fmt::format("  {:>10}", "(us)") : "");
  return s;
}

std::string format_row(const RunInfo& info, const Row& row) {
  const Options& o = info.options;
  std::string s = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.bytes, row.count, nccl_type_name(o.dtype),
                              redop_column(o), root_column(o));
  s += cell_text(row.out_of_place);
  s += cell_text(row.in_place);
  if (o.barrier_ref) {
    s += fmt::format("  {:>10}", row.barrier_us ? format_number(*row.barrier_us, 10) : std::string("N/A"));
  }
  return s + "\n";
}

std::string footer(const Totals& totals) {
  const std::uint64_t wrong = totals.wrong.value_or(0);
  std::string s;
  s += fmt::format("# {:<20} : {} {}\n", "Out of bounds values", wrong, wrong ? "FAILED" : "OK");
  s += fmt::format("# {:<20} : {:g} \n", "Avg bus bandwidth", totals.avg_busbw_GBps);
  s += "#\n";
  return s;
}

std::string summary_line(const RunInfo& info, const Totals& totals, std::size_t rows) {
  const Options& o = info.options;
  return fmt::format(
      "# mci-perf summary: collective={} backend={} transport={} algo={} ranks={} dtype={} op={} root={} "
      "blocking={} sizes={} min_bytes={} max_bytes={} avg_time_us={:.3f} avg_busbw_GBps={:.4f} "
      "peak_busbw_GBps={:.4f} wrong={} status={}\n",
      collective_name(o.collective), o.backend, info.transport, info.algo, info.ranks, dtype_name(o.dtype),
      redop_column(o), root_column(o), o.blocking ? 1 : 0, rows, o.sweep.min_bytes, o.sweep.max_bytes,
      totals.avg_time_us, totals.avg_busbw_GBps, totals.peak_busbw_GBps, wrong_text(totals.wrong),
      totals.ok() ? "OK" : "FAILED");
}

std::string to_json(const RunInfo& info, const std::vector<Row>& rows, const Totals& totals) {
  const Options& o = info.options;
  nlohmann::ordered_json j;
  j["tool"] = "mci-perf";
  j["version"] = info.version;
  j["args"] = o.argv;
  j["start_time"] = info.start_time;
  j["end_time"] = info.end_time;
  j["collective"] = collective_name(o.collective);
  j["backend"] = o.backend;
  j["transport"] = info.transport;
  j["algo"] = info.algo;
  j["ranks"] = info.ranks;
  j["dtype"] = dtype_name(o.dtype);
  j["type"] = nccl_type_name(o.dtype);
  j["op"] = redop_column(o);
  j["root"] = root_column(o);
  nlohmann::ordered_json cfg;
  cfg["min_bytes"] = o.sweep.min_bytes;
  cfg["max_bytes"] = o.sweep.max_bytes;
  if (o.sweep.step_bytes > 0) {
    cfg["step_bytes"] = o.sweep.step_bytes;
  } else {
    cfg["step_factor"] = o.sweep.step_factor;
  }
  cfg["warmup_iters"] = o.warmup;
  cfg["iters"] = o.iters;
  cfg["check_iters"] = o.check;
  cfg["blocking"] = o.blocking;
  cfg["average"] = average_name(o.average);
  cfg["timeout_s"] = std::chrono::duration<double>(o.timeout).count();
  cfg["barrier_ref"] = o.barrier_ref;
  j["config"] = cfg;
  j["devices"] = nlohmann::ordered_json::array();
  for (const RankInfo& r : info.devices) {
    j["devices"].push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}, {"device", r.device}});
  }
  j["results"] = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    nlohmann::ordered_json row;
    row["size"] = r.bytes;
    row["count"] = r.count;
    row["type"] = nccl_type_name(o.dtype);
    row["redop"] = redop_column(o);
    row["root"] = root_column(o);
    row["out_of_place"] = cell_json(r.out_of_place);
    row["in_place"] = cell_json(r.in_place);
    row["barrier_us"] = r.barrier_us ? nlohmann::ordered_json(*r.barrier_us) : nlohmann::ordered_json(nullptr);
    j["results"].push_back(row);
  }
  j["wrong"] = totals.wrong ? nlohmann::ordered_json(*totals.wrong) : nlohmann::ordered_json(nullptr);
  j["ok"] = totals.ok();
  j["avg_busbw_GBps"] = totals.avg_busbw_GBps;
  j["peak_busbw_GBps"] = totals.peak_busbw_GBps;
  j["avg_time_us"] = totals.avg_time_us;
  return j.dump(2) + "\n";
}

std::string to_csv(const RunInfo& info, const std::vector<Row>& rows) {
  const Options& o = info.options;
  std::string s =
      "collective,backend,transport,algo,ranks,size,count,type,redop,root,placement,time_us,algbw_GBps,"
      "busbw_GBps,wrong,barrier_us\n";
  auto line = [&](const Row& r, const char* placement, const Cell& c) {
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.6f},{:.6f},{},{}\n", collective_name(o.collective),
                     o.backend, info.transport, info.algo, info.ranks, r.bytes, r.count, dtype_name(o.dtype),
                     redop_column(o), root_column(o), placement, c.time_us, c.bw.algbw_GBps, c.bw.busbw_GBps,
                     c.wrong ? std::to_string(*c.wrong) : "", r.barrier_us ? fmt::format("{:.3f}", *r.barrier_us) : "");
  };
  for (const Row& r : rows) {
    if (r.out_of_place) line(r, "out_of_place", *r.out_of_place);
    if (r.in_place) line(r, "in_place", *r.in_place);
  }
  return s;
}

}  // namespace mci::perf
