// Builds the model from a walk of the PCI tree, for the importers that see
// one (hwloc, sysfs): which functions are GPUs, NICs or switches, and which
// bridges fold into one switch.
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

struct PciFunction {
  std::string busid;
  unsigned class_id = 0;  // 16 bits: 0x0604 bridge, 0x0302 3D controller, 0x0200 ethernet
  unsigned vendor = 0, device = 0;
  PciLink link;
  double GBps = 0;       // hwloc knows only the rate, not speed and width
  std::string net_name;  // the interface or HCA below a NIC
};

class PciTreeBuilder {
 public:
  explicit PciTreeBuilder(Topology& t) : t_(t) {}

  int cpu(int numa, const std::string& cpus);
  int host_bridge(int cpu, const std::string& name);
  // Adds a function below `parent` and returns the node its children hang
  // from. A bridge below a bridge of the same vendor is one more port of
  // the same switch (a switch shows up as an upstream port above its
  // downstream ports): it folds into its parent, as nvidia-smi counts it.
  int function(int parent, const PciFunction& f);

 private:
  Node& node(NodeKind kind, int parent);  // valid until the next node is added
  Topology& t_;
};

}  // namespace mci::topo
