// A reader of nccl-tests' output, written from nccl-tests' own format (the
// layout current NVIDIA/nccl-tests prints and writes: src/util.cu's
// writeDeviceReport, writeResultHeader, writeBenchmarkLine*, writeResultFooter
// and its -J JSON), as a script written for nccl-tests would read it. It
// knows nothing of mci-perf: the tests feed it mci-perf's output unchanged.
// Every parse_* throws std::runtime_error naming what did not fit.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mci::test::nccl_tests {

struct Device {
  int rank = -1, group = -1, pid = -1, device = -99;
  std::string hostname, device_hex, device_info;
};

struct Cell {
  double time = 0, algbw = 0, busbw = 0;
  std::optional<double> wrong;  // "N/A" without validation
};

struct Row {
  long long size = 0, count = 0;
  std::string type, redop;
  int root = 0;
  std::optional<Cell> out_of_place, in_place;  // "N/A" cells are empty
};

struct Report {
  std::string program;    // "# Collective test starting: NAME"
  std::string concluded;  // "# Collective test concluded: NAME"
  int nthread = 0, ngpus = 0, warmup = 0, iters = 0, agg_iters = 0, validation = -1, graph = -1;
  long long min_bytes = 0, max_bytes = 0, step = 0;
  std::string step_kind;   // factor or bytes
  std::string time_label;  // time or cputime
  std::vector<Device> devices;
  std::vector<Row> rows;
  long long out_of_bounds = -1;
  bool out_of_bounds_ok = false;
  double avg_busbw = -1;
};

inline void need(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("not nccl-tests' format: " + what);
}

inline std::optional<Cell> parse_cell(const std::vector<std::string>& f, std::size_t at) {
  if (f[at] == "N/A") return std::nullopt;
  Cell c;
  c.time = std::stod(f[at]);
  c.algbw = std::stod(f[at + 1]);
  c.busbw = std::stod(f[at + 2]);
  if (f[at + 3] != "N/A") c.wrong = std::stod(f[at + 3]);
  return c;
}

// The text on stdout.
inline Report parse_text(const std::string& text) {
  static const std::regex params(
      R"(^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+))");
  static const std::regex starting(R"(^# Collective test starting: (\S+)$)");
  static const std::regex concluded(R"(^# Collective test concluded: (\S+)$)");
  static const std::regex columns(
      R"(^#\s+size\s+count\s+type\s+redop\s+root\s+(time|cputime)\s+algbw\s+busbw\s+#wrong\s+(time|cputime)\s+algbw\s+busbw\s+#wrong)");
  static const std::regex oob(R"(^# Out of bounds values : (\d+) (OK|FAILED)$)");
  static const std::regex avg(R"(^# Avg bus bandwidth    : (\S+) ?(OK|FAILED)?\s*$)");
  Report r;
  std::istringstream in(text);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, params)) {
      r.nthread = std::stoi(m[1]);
      r.ngpus = std::stoi(m[2]);
      r.min_bytes = std::stoll(m[3]);
      r.max_bytes = std::stoll(m[4]);
      r.step = std::stoll(m[5]);
      r.step_kind = m[6];
      r.warmup = std::stoi(m[7]);
      r.iters = std::stoi(m[8]);
      r.agg_iters = std::stoi(m[9]);
      r.validation = std::stoi(m[10]);
      r.graph = std::stoi(m[11]);
    } else if (std::regex_search(line, m, starting)) {
      r.program = m[1];
    } else if (std::regex_search(line, m, concluded)) {
      r.concluded = m[1];
    } else if (line.rfind("#  Rank ", 0) == 0) {
      // nccl-tests' own reader of these lines (parseRankInfo) uses this sscanf.
      Device d;
      char host[1025] = {}, hex[129] = {}, info[1025] = {};
      const int n = std::sscanf(line.c_str(), "#  Rank %d Group %d Pid %d on %1024s device %d [%128[^]]] %1024[^\n]",
                                &d.rank, &d.group, &d.pid, host, &d.device, hex, info);
      need(n == 7, "device line '" + line + "'");
      d.hostname = host;
      d.device_hex = hex;
      d.device_info = info;
      r.devices.push_back(d);
    } else if (std::regex_search(line, m, columns)) {
      need(m[1] == m[2], "time columns differ");
      r.time_label = m[1];
      in_table = true;
    } else if (std::regex_search(line, m, oob)) {
      r.out_of_bounds = std::stoll(m[1]);
      r.out_of_bounds_ok = m[2] == "OK";
      in_table = false;
    } else if (std::regex_search(line, m, avg)) {
      r.avg_busbw = std::stod(m[1]);
    } else if (in_table && !line.empty() && line[0] != '#') {
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      need(f.size() >= 13, "row '" + line + "'");
      Row row;
      row.size = std::stoll(f[0]);
      row.count = std::stoll(f[1]);
      row.type = f[2];
      row.redop = f[3];
      row.root = std::stoi(f[4]);
      row.out_of_place = parse_cell(f, 5);
      row.in_place = parse_cell(f, 9);
      r.rows.push_back(row);
    }
  }
  need(!r.program.empty(), "no '# Collective test starting' line");
  need(r.nthread > 0, "no parameter line");
  need(!r.time_label.empty(), "no column header");
  need(r.out_of_bounds >= 0 && r.avg_busbw >= 0, "no footer");
  need(r.concluded == r.program, "no '# Collective test concluded' line");
  return r;
}

// nccl-tests' -J file (JSON version 2), read as its writer lays it out.
inline Report parse_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  need(j.at("version").get<int>() == 2, "JSON version");
  need(j.at("start_time").is_string() && j.at("end_time").is_string(), "start_time/end_time");
  need(j.at("args").is_array() && j.at("env").is_array(), "args/env");
  need(j.at("nccl_version").is_number_integer(), "nccl_version");
  const auto& c = j.at("config");
  Report r;
  r.nthread = c.at("nthreads").get<int>();
  r.ngpus = c.at("ngpus").get<int>();
  r.min_bytes = c.at("minimum_bytes").get<long long>();
  r.max_bytes = c.at("maximum_bytes").get<long long>();
  if (c.contains("step_factor")) {
    r.step = c.at("step_factor").get<long long>();
    r.step_kind = "factor";
  } else {
    r.step = c.at("step_bytes").get<long long>();
    r.step_kind = "bytes";
  }
  r.warmup = c.at("warmup_iters").get<int>();
  r.iters = c.at("iterations").get<int>();
  r.agg_iters = c.at("aggregated_iterations").get<int>();
  r.validation = c.at("validation").get<int>();
  r.graph = c.at("graph").get<int>();
  for (const char* b : {"blocking_collectives", "per_iter_timing", "parallel_init"}) {
    const std::string v = c.at(b).get<std::string>();  // nccl-tests writes "true"/"false" strings
    need(v == "true" || v == "false", b);
  }
  for (const auto& d : c.at("devices")) {
    Device dev;
    dev.rank = d.at("rank").get<int>();
    dev.group = d.at("group").get<int>();
    dev.pid = d.at("pid").get<int>();
    dev.hostname = d.at("hostname").get<std::string>();
    dev.device = d.at("device").get<int>();
    dev.device_hex = d.at("device_hex").get<std::string>();
    dev.device_info = d.at("device_info").get<std::string>();
    r.devices.push_back(dev);
  }
  bool cputime = false;
  auto cell = [&](const nlohmann::json& x) -> std::optional<Cell> {
    if (x.is_null()) return std::nullopt;
    Cell out;
    cputime = x.contains("cpu_time");
    out.time = x.at(cputime ? "cpu_time" : "time").get<double>();
    out.algbw = x.at("alg_bw").get<double>();
    out.busbw = x.at("bus_bw").get<double>();
    if (!x.at("nwrong").is_null()) out.wrong = x.at("nwrong").get<double>();
    return out;
  };
  for (const auto& row : j.at("results")) {
    Row out;
    out.size = row.at("size").get<long long>();
    out.count = row.at("count").get<long long>();
    out.type = row.at("type").get<std::string>();
    out.redop = row.at("redop").get<std::string>();
    out.root = std::stoi(row.at("root").get<std::string>());  // the printed column, "    -1"
    out.out_of_place = cell(row.at("out_of_place"));
    out.in_place = cell(row.at("in_place"));
    need(row.at("actual_iterations").get<int>() == r.iters, "actual_iterations");
    need(row.at("experiment_name").is_string(), "experiment_name");
    r.rows.push_back(out);
  }
  r.time_label = cputime ? "cputime" : "time";
  r.out_of_bounds = j.at("out_of_bounds").at("count").get<long long>();
  r.out_of_bounds_ok = j.at("out_of_bounds").at("okay").get<std::string>() == "true";
  r.avg_busbw = j.at("average_bus_bandwidth").at("bandwidth").get<double>();
  need(j.at("errors").is_array(), "errors");
  return r;
}

}  // namespace mci::test::nccl_tests
