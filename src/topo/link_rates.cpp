#include "topo/link_rates.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace mci::topo {

namespace {
// A VM may hide the width (0): the device is then assumed to run x16, as
// NCCL assumes too.
int usable_width(int width) { return width > 0 ? width : 16; }
}  // namespace

double pcie_GBps(double gts, int width) {
  const double coding = gts < 8 ? 8.0 / 10.0 : 128.0 / 130.0;
  return gts * coding * usable_width(width) / 8.0;
}

double pcie_nccl_GBps(double gts, int width) {
  // NCCL: width * speed / 80 with speed 60 for Gen3 (units of 100 Mb/s per lane after its rounding).
  return usable_width(width) * gts * 7.5 / 80.0;
}

double nvlink_GBps(int sm) {
  if (sm >= 100) return 50.0;
  if (sm >= 70) return 25.0;
  return 20.0;
}

double nvlink_nccl_GBps(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

double smp_GBps(const std::string& arch, const std::string& vendor, int family, int model) {
  if (arch == "ppc64") return 32.0;
  if (arch == "arm64" || arch == "aarch64") return 6.0;
  if (vendor == "AuthenticAMD") return 16.0;
  if (vendor == "GenuineIntel" && family == 6) {
    if (model >= 0xCF) return 40.0;  // Emerald Rapids
    if (model >= 0x8F) return 22.0;  // Sapphire Rapids
    if (model >= 0x55) return 10.0;  // Skylake
  }
  return 6.0;
}

double parse_gts(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v) || v <= 0) return 0;
  return v;
}

int pcie_generation(double gts) {
  constexpr double kRates[] = {2.5, 5, 8, 16, 32, 64};
  int gen = 0;
  for (int g = 0; g < 6; ++g) {
    if (gts >= kRates[g] * 0.9) gen = g + 1;
  }
  return gen;
}

std::string gts_text(double gts) { return fmt::format("{:.1f} GT/s PCIe", gts); }

}  // namespace mci::topo
