#pragma once

// The part of NVML's C ABI that mci-topo calls, declared as nvml.h declares
// it (topo/nvml_import.cpp opens libnvidia-ml.so.1 with dlopen, so nvml.h is
// not needed). One declaration for the caller and for the suite's stand-in
// library (tests/support/fake_nvml.cpp): a function called through a
// pointer to another function type is undefined behaviour, and clang's
// UBSan (-fsanitize=function) stops the call.

namespace mci::topo::nvml {

using nvmlReturn_t = int;
struct nvmlDevice_st;  // opaque: the driver's
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

}  // namespace mci::topo::nvml
