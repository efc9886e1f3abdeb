// CPU sets in the two spellings topology sources use: Linux lists
// ("0-15,32-47", sysfs cpulist, nvidia-smi's CPU Affinity) and hex masks
// ("0000ffff,ffffffff": sysfs cpumap, NCCL's affinity, 32 bits per word).
#pragma once

#include <string>
#include <vector>

namespace mci::topo {

std::vector<int> parse_cpu_list(const std::string& list);
std::vector<int> parse_cpu_mask(const std::string& mask);
std::string cpu_list_text(const std::vector<int>& cpus);  // "0-15,32-47"
std::string cpu_mask_text(const std::vector<int>& cpus);  // "0000ffff"

}  // namespace mci::topo
