// The live machine from Linux's sysfs: NUMA nodes and their CPUs, the PCI
// tree with each link's current and maximum speed and width. The fallback
// when mci is built without hwloc, and the source of what hwloc does not
// report (maximum link speeds, a device's NUMA id). `root` is "/sys" live;
// tests point it at a fake tree.
#pragma once

#include <string>

#include "topo/model.hpp"

namespace mci::topo {

Topology read_sysfs(const std::string& root);

// Adds the sysfs facts of every PCI node found by busid (speed, width,
// their maximums) and notes devices whose NUMA node is hidden.
void add_sysfs_link_facts(Topology& t, const std::string& root);

// /proc/cmdline and the CPU's hypervisor flag, for the advice.
void add_host_facts(Topology& t, const std::string& proc_root);

}  // namespace mci::topo
