// A stand-in for libnvidia-ml.so.1, loaded by mci-topo's tests through
// MCI_NVML_LIBRARY: the handful of NVML functions mci-topo opens, answering
// for the machine FAKE_NVML_MACHINE names. Its GPUs sit at the bus ids of
// tests/fixtures/topo/sysfs-2socket-3gpu:
//   nv18         GPU0-GPU1 joined by 18 NVLinks (PIX below), GPU2 on the other
//                socket (SYS); P2P OK between GPU0 and GPU1 only
//   nvswitch     every GPU with 18 NVLinks into NVSwitches
//   stray        nv18 plus a GPU the PCI tree does not hold
//   no_driver    nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
//   no_gpus      the driver is loaded, no GPU
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "topo/nvml_abi.hpp"

namespace {

using mci::topo::nvml::nvmlDevice_t;
using mci::topo::nvml::nvmlPciInfo_t;

struct FakeGpu {
  const char* busid;
  int cpu_first, cpu_last;
};

constexpr FakeGpu kGpus[] = {{"00000000:03:00.0", 0, 7},
                             {"00000000:04:00.0", 0, 7},
                             {"00000000:81:00.0", 8, 15},
                             {"00000000:C1:00.0", 8, 15}};

std::string machine() {
  const char* m = std::getenv("FAKE_NVML_MACHINE");
  return m ? m : "nv18";
}

unsigned gpu_count() {
  const std::string m = machine();
  if (m == "no_gpus") return 0;
  return m == "stray" ? 4 : 3;
}

// Handles are 1-based indices.
unsigned index_of(nvmlDevice_t h) { return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(h)) - 1; }

void fill(nvmlPciInfo_t* p, const char* busid) {
  std::memset(p, 0, sizeof(*p));
  std::strncpy(p->busId, busid, sizeof(p->busId) - 1);
}

bool nvlinked(unsigned gpu) {
  const std::string m = machine();
  return m == "nvswitch" || gpu < 2;
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return machine() == "no_driver" ? 9 : 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gpu_count();
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* h) {
  if (i >= gpu_count()) return 2;
  *h = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(i + 1));
  return 0;
}

int nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* p) {
  fill(p, kGpus[index_of(h)].busid);
  return 0;
}

int nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned len) {
  std::strncpy(name, "NVIDIA H100 80GB HBM3", len - 1);
  name[len - 1] = 0;
  return 0;
}

int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  const unsigned x = index_of(a), y = index_of(b);
  *level = (x < 2 && y < 2) ? 10 : 50;
  return 0;
}

int nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned link, int* active) {
  if (link >= 18) return 2;
  *active = nvlinked(index_of(h)) ? 1 : 0;
  return 0;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned, int* type) {
  *type = machine() == "nvswitch" ? 2 : 0;
  return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t h, unsigned, nvmlPciInfo_t* p) {
  fill(p, kGpus[index_of(h) == 0 ? 1 : 0].busid);
  return 0;
}

int nvmlDeviceGetCpuAffinity(nvmlDevice_t h, unsigned size, unsigned long* set) {
  std::memset(set, 0, size * sizeof(unsigned long));
  const FakeGpu& g = kGpus[index_of(h)];
  for (int c = g.cpu_first; c <= g.cpu_last; ++c) set[0] |= 1ul << c;
  return 0;
}

int nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int, int* status) {
  *status = (index_of(a) < 2 && index_of(b) < 2) ? 0 : 1;
  return 0;
}

}  // extern "C"
