#include "topo/cpu_sets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <sstream>

namespace mci::topo {

std::vector<int> parse_cpu_list(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto dash = part.find('-');
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    if (end == part.c_str()) continue;
    const long hi = dash == std::string::npos ? lo : std::strtol(part.c_str() + dash + 1, nullptr, 10);
    for (long c = lo; c <= hi && c - lo < 65536; ++c) out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> parse_cpu_mask(const std::string& mask) {
  std::vector<std::uint32_t> words;
  std::stringstream ss(mask);
  std::string word;
  while (std::getline(ss, word, ','))
    words.push_back(static_cast<std::uint32_t>(std::strtoul(word.c_str(), nullptr, 16)));
  std::vector<int> out;
  // The last word holds CPUs 0-31.
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::uint32_t bits = words[words.size() - 1 - w];
    for (int b = 0; b < 32; ++b) {
      if (bits & (1u << b)) out.push_back(static_cast<int>(w) * 32 + b);
    }
  }
  return out;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string cpu_mask_text(const std::vector<int>& cpus) {
  const int top = cpus.empty() ? 0 : *std::max_element(cpus.begin(), cpus.end());
  std::vector<std::uint32_t> words(static_cast<std::size_t>(top / 32 + 1), 0);
  for (int c : cpus) words[static_cast<std::size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (std::size_t w = words.size(); w-- > 0;) {
    if (!out.empty()) out += ',';
    out += fmt::format("{:08x}", words[w]);
  }
  return out;
}

}  // namespace mci::topo
