// `mci-topo check --perf RESULT.json`: how close a measured busbw (mci-perf's
// JSON) came to what the wiring allows.
#pragma once

#include <optional>
#include <string>

#include "topo/model.hpp"

namespace mci::topo {

struct PerfCheck {
  std::string collective, backend;
  int ranks = 0;
  double busbw_GBps = 0;     // the best busbw of the sweep
  double line_GBps = 0;      // the ceiling it is compared with; 0 when unknown
  std::string ceiling_from;  // what the ceiling is ("ring GPU0 -> GPU1 (NV18)")
  double guide = 0;          // the fraction a healthy run reaches
  std::optional<double> fraction;
  std::string text;  // the verdict for the terminal
};

// `ceiling_GBps`: for data through host memory (no "device_links"), the
// memory-copy rate bench_ceilings measured (mci-topo cannot know it);
// `ceilings_program`: how the advice
// names bench_ceilings (common/program_name.hpp). Throws ConfigError when
// the JSON is not mci-perf's.
PerfCheck check_perf(const Topology& t, const std::string& json, const std::string& what,
                     std::optional<double> ceiling_GBps, const std::string& ceilings_program = "bench_ceilings");

}  // namespace mci::topo
