#include "topo/hwloc_import.hpp"

#include <fmt/format.h>
#include <hwloc.h>

#include <cstdlib>
#include <memory>

#include "mci/errors.hpp"
#include "topo/pci_tree.hpp"

namespace mci::topo {

namespace {

struct TopologyCloser {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyCloser>;

std::string bitmap_list(hwloc_const_bitmap_t b) {
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0 || s == nullptr) return "";
  std::string out(s);
  std::free(s);
  return out;
}

std::string info(hwloc_obj_t o, const char* key) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, key) : nullptr;
  return v ? v : "";
}

class Walker {
 public:
  Walker(hwloc_topology_t h, Topology& t) : h_(h), t_(t), build_(t) {}

  void run() {
    // NUMA nodes sit at a virtual depth (memory children): ask by type.
    const int n = hwloc_get_nbobjs_by_type(h_, HWLOC_OBJ_NUMANODE);
    hwloc_obj_t package = hwloc_get_obj_by_type(h_, HWLOC_OBJ_PACKAGE, 0);
    const std::string arch = info(hwloc_get_root_obj(h_), "Architecture");
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(h_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      const int id = build_.cpu(static_cast<int>(numa->os_index), bitmap_list(numa->cpuset));
      Node& c = t_.at(id);
      c.arch = arch;
      c.vendor = info(package, "CPUVendor");
      c.cpu_family = std::atoi(info(package, "CPUFamilyNumber").c_str());
      c.cpu_model = std::atoi(info(package, "CPUModelNumber").c_str());
      numa_.push_back({numa, id});
    }
    visit(hwloc_get_root_obj(h_));
  }

 private:
  // I/O hangs off a normal object; its CPUs name the NUMA node.
  int cpu_for(hwloc_obj_t normal) const {
    for (const auto& [obj, id] : numa_) {
      if (normal->cpuset && hwloc_bitmap_intersects(normal->cpuset, obj->cpuset)) return id;
    }
    return numa_.empty() ? -1 : numa_.front().second;
  }

  void visit(hwloc_obj_t o) {
    for (hwloc_obj_t io = o->io_first_child; io; io = io->next_sibling) {
      const int cpu = cpu_for(o);
      if (cpu >= 0) io_object(io, cpu);
    }
    for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) visit(c);
  }

  void io_object(hwloc_obj_t io, int parent) {
    int here = parent;
    if (io->type == HWLOC_OBJ_BRIDGE && io->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      here = build_.host_bridge(parent, fmt::format("pci{:04x}:{:02x}", io->attr->bridge.downstream.pci.domain,
                                                    io->attr->bridge.downstream.pci.secondary_bus));
    } else if (io->type == HWLOC_OBJ_PCI_DEVICE || io->type == HWLOC_OBJ_BRIDGE) {
      if (t_.at(parent).kind == NodeKind::cpu) parent = build_.host_bridge(parent, "");
      const auto& p = io->type == HWLOC_OBJ_BRIDGE ? io->attr->bridge.upstream.pci : io->attr->pcidev;
      PciFunction f;
      f.busid = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", p.domain, p.bus, p.dev, p.func);
      f.class_id = p.class_id;
      f.vendor = p.vendor_id;
      f.device = p.device_id;
      f.GBps = p.linkspeed;
      for (hwloc_obj_t os = io->io_first_child; os; os = os->next_sibling) {
        if (os->type == HWLOC_OBJ_OS_DEVICE && f.net_name.empty() &&
            (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)) {
          f.net_name = os->name ? os->name : "";
        }
      }
      here = build_.function(parent, f);
    } else {
      return;  // OS devices were read with their PCI function
    }
    for (hwloc_obj_t c = io->io_first_child; c; c = c->next_sibling) io_object(c, here);
  }

  hwloc_topology_t h_;
  Topology& t_;
  PciTreeBuilder build_;
  std::vector<std::pair<hwloc_obj_t, int>> numa_;
};

}  // namespace

bool hwloc_built() { return true; }

namespace {

HwlocTopology make_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw ConfigError("hwloc: cannot initialise a topology (out of memory?)");
  HwlocTopology h(raw);
  // The default filter drops PCI objects; keep the bridges and devices that matter.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return h;
}

}  // namespace

void export_hwloc_xml(const std::string& path) {
  HwlocTopology h = make_topology();
  if (hwloc_topology_load(h.get()) != 0) throw ConfigError("hwloc failed to load this machine's topology");
  if (hwloc_topology_export_xml(h.get(), path.c_str(), 0) != 0) {
    throw ConfigError(fmt::format("hwloc cannot write '{}': check that its folder exists and is writable", path));
  }
}

Topology read_hwloc(const std::string& xml_file) {
  HwlocTopology h = make_topology();
  hwloc_topology_t raw = h.get();
  if (!xml_file.empty() && hwloc_topology_set_xml(raw, xml_file.c_str()) != 0) {
    throw ConfigError(
        fmt::format("hwloc cannot read '{}' as XML: check the path, or write it again with "
                    "`lstopo --of xml FILE`",
                    xml_file));
  }
  if (hwloc_topology_load(raw) != 0) {
    if (xml_file.empty()) throw ConfigError("hwloc failed to read this machine; retry with --no-hwloc (sysfs)");
    throw ConfigError(
        fmt::format("hwloc cannot read '{}' as its XML (NCCL's files go to --nccl-xml); write it "
                    "again with `lstopo --of xml FILE` or `mci-topo --export-hwloc-xml FILE`",
                    xml_file));
  }
  Topology t;
  t.source = xml_file.empty() ? "live (hwloc)" : "hwloc-xml " + xml_file;
  Walker(raw, t).run();
  return t;
}

}  // namespace mci::topo
