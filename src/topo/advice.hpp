// What the wiring means for a job: the ring order and its bottleneck, which
// of all-to-all/direct, ring and tree fits and why, where to bind ranks,
// and the warnings (P2P off by default, IOMMU, a VM's flat topology, links
// below their maximum speed).
#pragma once

#include <string>
#include <vector>

#include "topo/model.hpp"
#include "topo/paths.hpp"

namespace mci::topo {

struct AlgorithmFit {
  std::string algorithm;  // "all-to-all/direct", "ring", "tree"
  bool fits = false;
  std::string why;
};

struct Binding {
  std::vector<int> gpus;  // node ids
  int cpu = -1;           // the cpu node
  int numa = -1;
  std::string cpus;
};

// The ring through `gpus` (node ids, any order) that crosses each switch
// and socket once: the order, and its slowest hop.
struct Ring {
  std::vector<int> order;
  double GBps = 0;
  std::string bottleneck;  // "GPU1 -> GPU2 (SYS)"
  bool over_nvlink = false;
};

struct Advice {
  Ring ring;  // through every GPU
  std::vector<AlgorithmFit> fits;
  std::vector<Binding> bindings;
  std::vector<std::string> warnings;
};

Advice advise(const Topology& t);
Ring ring_through(const Topology& t, const std::vector<int>& gpus);

// The advice as text for a terminal (after the matrix).
std::string advice_text(const Topology& t, const Advice& a);

}  // namespace mci::topo
