#include <fmt/format.h>

#include "topo/paths.hpp"
#include "topo/render.hpp"

namespace mci::topo {

namespace {

constexpr const char* kLegend =
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

constexpr const char* kP2pLegend =
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  OK   = Status Ok\n"
    "  CNS  = Chipset not supported\n"
    "  GNS  = GPU not supported\n"
    "  TNS  = Topology not supported\n"
    "  NS   = Not supported\n"
    "  U    = Unknown\n";

// A tab, then text. Not `s += "\t" + text`, nor a short literal assigned
// to a string: at -O2 and above, g++ 12 reports a -Wrestrict overlap in
// libstdc++'s inlined replace that cannot happen (GCC bugs 105329, 105651).
void append_cell(std::string& s, const std::string& text) {
  s += '\t';
  s += text;
}

std::string cell(const Path& p) { return p.smi == "X" ? " X " : p.smi; }

std::string na_or(const std::string& s) { return s.empty() ? "N/A" : s; }

std::string nic_legend(const Topology& t) {
  if (t.nics().empty()) return "";
  std::string s = "\nNIC Legend:\n\n";
  for (int n : t.nics()) s += fmt::format("  {}: {}\n", t.at(n).name, na_or(t.at(n).label));
  return s;
}

std::string notes(const Topology& t) {
  std::string s;
  for (const std::string& n : t.notes) s += "Note: " + n + "\n";
  return s;
}

// No GPU: what a rank's placement still depends on.
std::string cpu_view(const Topology& t) {
  std::string s = fmt::format("No GPU seen: {}\n\n", na_or(t.no_gpu_reason));
  s += "\tCPU Affinity\tNUMA Affinity\n";
  for (int c : t.cpus()) {
    const Node& n = t.at(c);
    s += fmt::format("{}\t{}\t{}\n", n.name, na_or(n.cpus), numa_text(n.numa));
  }
  const std::vector<int> nics = t.nics();
  if (!nics.empty()) {
    s += "\n";
    for (int n : nics) s += "\t" + t.at(n).name;
    s += "\tCPU Affinity\tNUMA Affinity\n";
    for (int a : nics) {
      s += t.at(a).name;
      for (int b : nics) append_cell(s, cell(classify(t, a, b)));
      const int c = t.cpu_of(a);
      const std::string cpus = c < 0 ? "" : t.at(c).cpus;
      const int numa = c < 0 ? -1 : t.at(c).numa;
      s += fmt::format("\t{}\t{}\n", na_or(cpus), numa_text(numa));
    }
  }
  s += "\n";
  s += kLegend;
  s += nic_legend(t);
  return s;
}

}  // namespace

std::string matrix_text(const Topology& t) {
  const std::vector<int> gpus = t.gpus();
  if (gpus.empty()) return cpu_view(t) + notes(t);
  std::vector<int> ends = gpus;
  for (int n : t.nics()) ends.push_back(n);
  std::string s;
  for (int e : ends) s += "\t" + t.at(e).name;
  s += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  for (int a : ends) {
    s += t.at(a).name;
    for (int b : ends) append_cell(s, cell(classify(t, a, b)));
    if (t.at(a).kind == NodeKind::gpu) {
      const int c = t.cpu_of(a);
      const std::string cpus = c < 0 ? "" : t.at(c).cpus;
      const int numa = c < 0 ? -1 : t.at(c).numa;
      // GPU NUMA ID is the GPU memory's own node (C2C systems); PCIe GPUs have none.
      s += fmt::format("\t{}\t{}\t\tN/A", na_or(cpus), numa_text(numa));
    }
    s += "\n";
  }
  s += "\n";
  s += kLegend;
  s += nic_legend(t);
  return s + notes(t);
}

std::string p2p_text(const Topology& t, char mode) {
  const std::vector<int> gpus = t.gpus();
  if (gpus.empty()) return fmt::format("No GPU seen: {}\n", na_or(t.no_gpu_reason));
  std::string s = " ";
  for (int g : gpus) s += "\t" + t.at(g).name;
  s += "\t\n";
  for (int a : gpus) {
    s += " " + t.at(a).name;
    for (int b : gpus) {
      std::string v;
      const Path p = classify(t, a, b);
      const auto reported = t.reported_p2p.find({std::min(a, b), std::max(a, b)});
      if (a == b)
        v = std::string(1, 'X');  // not = "X": see append_cell
      else if (mode == 'n')
        v = p.nvlinks > 0 ? "OK" : "NS";
      else if (reported != t.reported_p2p.end())
        v = reported->second;
      else
        v = nccl_p2p_by_default(p) ? "OK" : "U";
      s += "\t" + v;
    }
    s += "\t\n";
  }
  s += "\n";
  s += kP2pLegend;
  if (t.reported_p2p.empty() && mode != 'n') {
    s += "\nWithout NVML, OK means NCCL would use P2P there by default (NVLink, or PCIe up to PXB); U means the\n"
         "PCI path alone cannot tell (run on the machine with its driver loaded).\n";
  }
  return s;
}

}  // namespace mci::topo
