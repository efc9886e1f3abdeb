#include "topo/app.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <optional>

#include "common/program_name.hpp"
#include "mci/errors.hpp"
#include "topo/advice.hpp"
#include "topo/hwloc_import.hpp"
#include "topo/live_import.hpp"
#include "topo/nccl_xml.hpp"
#include "topo/perf_check.hpp"
#include "topo/render.hpp"

#ifndef MCI_TOPO_VERSION
#define MCI_TOPO_VERSION "dev"
#endif

namespace mci::topo {

namespace {

struct Options {
  bool matrix = false;
  std::string p2p;
  std::string format = "text";
  std::string nccl_xml, hwloc_xml, export_nccl_xml, export_hwloc_xml;
  LiveSources live;
  bool no_hwloc = false;
  std::string perf;
  std::optional<double> ceiling;
};

void add_sources(CLI::App& app, Options& o) {
  auto* n =
      app.add_option("--nccl-xml", o.nccl_xml, "Read NCCL's topology XML (NCCL_TOPO_DUMP_FILE) instead of this machine")
          ->type_name("FILE");
  auto* h = app.add_option("--hwloc-xml", o.hwloc_xml, "Read hwloc's XML (lstopo --of xml) instead of this machine")
                ->type_name("FILE");
  n->excludes(h);
  app.add_option("--sysfs-root", o.live.sys_root, "Read sysfs from DIR instead of /sys (tests, captured trees)")
      ->type_name("DIR");
  app.add_option("--proc-root", o.live.proc_root, "Read cmdline and cpuinfo from DIR instead of /proc")
      ->type_name("DIR");
  app.add_option("--nvml-library", o.live.nvml_library,
                 "NVML library to dlopen (default: $MCI_NVML_LIBRARY, else libnvidia-ml.so.1)")
      ->type_name("FILE");
  app.add_flag("--no-hwloc", o.no_hwloc, "Read this machine through sysfs even when built with hwloc");
}

Topology load(const Options& o) {
  if (!o.nccl_xml.empty()) return read_nccl_xml_file(o.nccl_xml);
  if (!o.hwloc_xml.empty()) {
    Topology t = read_hwloc(o.hwloc_xml);
    t.no_gpu_reason = o.hwloc_xml + " holds no NVIDIA GPU (hwloc files carry no NVLinks: use --nccl-xml for those)";
    t.finish();
    if (!t.gpus().empty()) t.no_gpu_reason.clear();
    return t;
  }
  LiveSources s = o.live;
  s.use_hwloc = !o.no_hwloc;
  return read_live(s);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw ConfigError(fmt::format("cannot write '{}': check that its folder exists and is writable", path));
}

// nvidia-smi spells it -p2p; CLI11 takes single-dash options of one letter.
std::vector<std::string> with_long_p2p(std::vector<std::string> argv) {
  for (std::string& a : argv) {
    if (a == "-p2p") a = "--p2p";
  }
  return argv;
}

int run(const Options& o, bool check, std::ostream& out) {
  const Topology t = load(o);
  if (check) {
    const std::string json = read_text_file(o.perf, "mci-perf's JSON output");
    out << check_perf(t, json, o.perf, o.ceiling, program_to_run("bench_ceilings")).text;
    return 0;
  }
  if (!o.export_nccl_xml.empty()) write_file(o.export_nccl_xml, write_nccl_xml(t));
  if (!o.export_hwloc_xml.empty()) export_hwloc_xml(o.export_hwloc_xml);
  if (o.format == "json") {
    out << json_text(t, advise(t));
  } else if (o.format == "dot") {
    out << dot_text(t);
  } else if (!o.p2p.empty()) {
    out << p2p_text(t, o.p2p[0]);
  } else if (o.matrix) {
    out << matrix_text(t);
  } else if (o.export_nccl_xml.empty() && o.export_hwloc_xml.empty()) {
    out << matrix_text(t) << "\n" << advice_text(t, advise(t));
  }
  return 0;
}

}  // namespace

int topo_main(const std::vector<std::string>& argv_in, std::ostream& out, std::ostream& err) {
  Options o;
  CLI::App app{"mci-topo: how the GPUs, NICs and CPUs are wired, and what bandwidth the wiring allows"};
  app.set_version_flag("--version", std::string("mci-topo ") + MCI_TOPO_VERSION);
  app.add_flag("-m,--matrix", o.matrix, "Print nvidia-smi's topology matrix (topo -m)");
  app.add_option("--p2p", o.p2p,
                 "Print nvidia-smi's P2P table (also -p2p; r, w, n, a, p: read, write, nvlink, atomics, prop)")
      ->check(CLI::IsMember({"r", "w", "n", "a", "p"}));
  app.add_option("--format", o.format, "text (matrix and advice), json (nodes, links, paths, advice) or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "json", "dot"}));
  app.add_option("--export-nccl-xml", o.export_nccl_xml, "Write the topology as NCCL_TOPO_FILE XML to FILE")
      ->type_name("FILE");
  app.add_option("--export-hwloc-xml", o.export_hwloc_xml,
                 "Write this machine as hwloc XML to FILE (what lstopo --of xml writes)")
      ->type_name("FILE");
  add_sources(app, o);
  CLI::App* check = app.add_subcommand("check", "Compare a measured busbw with the wiring's line rate");
  check->add_option("--perf", o.perf, "mci-perf's JSON output (mci-perf --json FILE)")->type_name("FILE")->required();
  check->add_option("--ceiling", o.ceiling, "GB/s the cpu backend's ranks can copy (bench_ceilings' Memcpy)")
      ->type_name("GBPS")
      ->check(CLI::PositiveNumber);
  add_sources(*check, o);

  std::vector<std::string> args = with_long_p2p(argv_in);
  std::vector<const char*> cargv;
  for (const std::string& a : args) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << (dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e)
                  ? app.help()
                  : std::string(e.what()) + "\n");
      return 0;
    }
    err << "mci-topo: " << e.what() << "\nRun mci-topo --help for the options.\n";
    return 2;
  }
  try {
    return run(o, check->parsed(), out);
  } catch (const ConfigError& e) {
    err << "mci-topo: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace mci::topo
