// The machine as mci-topo sees it: devices (CPU/NUMA nodes, host bridges,
// PCI switches, GPUs, NVSwitch fabrics, NICs) and the links between them,
// each with its per-direction line rate. Every importer (NCCL XML, hwloc,
// sysfs, NVML) fills this one model; every output reads it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mci::topo {

enum class NodeKind { cpu, host_bridge, pci_switch, pci_device, gpu, nvswitch, nic };
enum class LinkKind { pci, nvlink, smp };

const char* node_kind_name(NodeKind k);
const char* link_kind_name(LinkKind k);

// A PCIe link as the device reports it: the current speed and width, and
// the maximum when known (NCCL's XML holds only the current one).
struct PciLink {
  double gts = 0;      // per lane, GT/s (2.5, 5, 8, 16, 32, 64)
  int width = 0;       // lanes; 0 when hidden (VMs)
  double max_gts = 0;  // 0 when unknown
  int max_width = 0;   // 0 when unknown
};

struct Node {
  int id = -1;
  NodeKind kind = NodeKind::pci_device;
  std::string name;          // GPU0, NIC0, CPU0, SW0, HB0, NVS0, PCI0
  int parent = -1;           // the PCI tree: device -> switch -> host bridge -> cpu
  std::string busid;         // 0000:17:00.0 (lower case); empty for cpus and fabrics
  int numa = -1;             // cpu: its NUMA node id; -1 when the machine hides it
  int package = 0;           // cpu: its socket
  std::string cpus;          // cpu: the CPU list, "0-15,32-47"
  std::string arch, vendor;  // cpu
  int cpu_model = 0, cpu_family = 0;
  int index = -1;                                 // gpu: CUDA/NVML index; nic: NIC#
  int sm = 0;                                     // gpu: compute capability x10 (90 = Hopper)
  int rank = -1;                                  // gpu: the rank NCCL gave it in a dump
  std::string label;                              // gpu: product name; nic: interface or HCA name
  double nic_gbps = 0;                            // nic: port speed, Gb/s
  std::string pci_class, pci_vendor, pci_device;  // "0x030200", "0x10de"
  PciLink up;                                     // pci nodes: the link towards the parent
};

struct Link {
  int a = -1, b = -1;
  LinkKind kind = LinkKind::pci;
  int count = 1;         // NVLinks bonded together
  double GBps = 0;       // line rate per direction
  double nccl_GBps = 0;  // what NCCL's topology model assumes for the same link
};

// nvidia-smi's levels (NVML's nvmlGpuTopologyLevel_t / 10, plus NVLink).
enum class PciLevel { self = 0, pix = 1, pxb = 2, phb = 3, node = 4, sys = 5 };

struct Topology {
  std::string source;  // "nccl-xml tests/.../x.xml", "live (hwloc, NVML)"
  std::vector<Node> nodes;
  std::vector<Link> links;
  // Why no GPU is in the model, when none is ("NVML: libnvidia-ml.so.1 not
  // found ..."); empty when GPUs were seen or the source cannot say.
  std::string no_gpu_reason;
  // What the importers noticed that the model cannot hold (a GPU NVML saw
  // but the PCI tree did not, hidden link widths).
  std::vector<std::string> notes;
  // Facts for the advice, read from the host when live.
  std::string kernel_cmdline;
  bool hypervisor = false;
  bool numa_hidden = false;  // devices report NUMA node -1
  // nvidia-smi's own answer per GPU pair when NVML gave one (it then wins
  // over what the PCI tree implies); keys are GPU node ids, lower first.
  std::map<std::pair<int, int>, PciLevel> reported_levels;
  // NVML's P2P read status per GPU pair ("OK", "CNS", ...).
  std::map<std::pair<int, int>, std::string> reported_p2p;

  int add(Node n);  // returns the new id
  void add_link(Link l);
  const Node& at(int id) const { return nodes.at(static_cast<std::size_t>(id)); }
  Node& at(int id) { return nodes.at(static_cast<std::size_t>(id)); }
  std::vector<int> of_kind(NodeKind k) const;  // ids in index/name order
  std::vector<int> gpus() const { return of_kind(NodeKind::gpu); }
  std::vector<int> nics() const { return of_kind(NodeKind::nic); }
  std::vector<int> cpus() const { return of_kind(NodeKind::cpu); }
  std::optional<int> find_busid(const std::string& busid) const;
  // The link between a node and its parent.
  const Link* uplink(int id) const;
  // The cpu node above a device (-1 when it hangs nowhere).
  int cpu_of(int id) const;
  // Gives every node a name from its kind and order (GPU0.., NIC0..), and
  // the PCI links their rates. Importers call it once at the end.
  void finish();
};

std::string normalize_busid(const std::string& busid);

// A NUMA id as the outputs print it: "N/A" when hidden (-1), as nvidia-smi.
std::string numa_text(int numa);

}  // namespace mci::topo
