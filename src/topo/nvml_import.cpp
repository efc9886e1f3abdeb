#include "topo/nvml_import.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <map>
#include <memory>

#include "topo/cpu_sets.hpp"
#include "topo/link_rates.hpp"
#include "topo/nvml_abi.hpp"

namespace mci::topo {

namespace {

using nvml::nvmlDevice_t;
using nvml::nvmlPciInfo_t;
using nvml::nvmlReturn_t;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr unsigned kMaxNvLinks = 18;
constexpr int kNvLinkRemoteGpu = 0;
constexpr int kNvLinkRemoteSwitch = 2;
constexpr int kP2pCapsRead = 0;

struct Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*cpu_affinity)(nvmlDevice_t, unsigned, unsigned long*) = nullptr;
  nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
};

struct LibraryCloser {
  void operator()(void* h) const { dlclose(h); }
};
using Library = std::unique_ptr<void, LibraryCloser>;

// nvmlShutdown once everything read is copied out.
struct Session {
  const Api& api;
  ~Session() { api.shutdown(); }
};

template <typename F>
bool bind(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return fn != nullptr;
}

std::string nvml_error(const Api& api, nvmlReturn_t r) {
  const char* s = api.error_string ? api.error_string(r) : nullptr;
  return fmt::format("{} (NVML error {})", s ? s : "unknown error", r);
}

const char* p2p_text(int status) {
  switch (status) {
    case 0: return "OK";
    case 1: return "CNS";
    case 2: return "GNS";
    case 3: return "TNS";
    case 4:
    case 5: return "NS";
    default: return "U";
  }
}

struct Gpu {
  nvmlDevice_t handle;
  int node;
};

class Merger {
 public:
  Merger(const Api& api, Topology& t) : api_(api), t_(t) {}

  void gpu(unsigned index, nvmlDevice_t h) {
    nvmlPciInfo_t pci{};
    if (api_.pci(h, &pci) != kSuccess) return;
    const std::string busid = normalize_busid(pci.busId);
    int id = -1;
    if (const auto found = t_.find_busid(busid)) {
      id = *found;
    } else {
      Node n;
      n.busid = busid;
      n.parent = cpu_from_affinity(h);
      id = t_.add(n);
      t_.notes.push_back(
          fmt::format("NVML's GPU {} ({}) is not in the PCI tree: its path is NVML's word alone", index, busid));
    }
    Node& n = t_.at(id);
    n.kind = NodeKind::gpu;
    n.index = static_cast<int>(index);
    n.name.clear();
    std::array<char, 96> name{};
    if (api_.name(h, name.data(), name.size()) == kSuccess) n.label = name.data();
    int major = 0, minor = 0;
    if (api_.capability && api_.capability(h, &major, &minor) == kSuccess) n.sm = major * 10 + minor;
    gpus_.push_back({h, id});
  }

  void links() {
    std::map<std::pair<int, int>, int> counts;
    int fabric = -1;
    for (const Gpu& g : gpus_) {
      for (unsigned l = 0; l < kMaxNvLinks; ++l) {
        int active = 0;
        if (api_.link_state(g.handle, l, &active) != kSuccess || !active) continue;
        int type = kNvLinkRemoteGpu;
        if (api_.remote_type) api_.remote_type(g.handle, l, &type);
        if (type == kNvLinkRemoteSwitch) {
          if (fabric < 0) {
            Node s;
            s.kind = NodeKind::nvswitch;
            fabric = t_.add(s);
          }
          ++counts[{g.node, fabric}];
          continue;
        }
        nvmlPciInfo_t remote{};
        if (api_.remote_pci(g.handle, l, &remote) != kSuccess) continue;
        const auto peer = t_.find_busid(normalize_busid(remote.busId));
        // Each end counts the pair's links; one side is enough.
        if (type == kNvLinkRemoteGpu && peer && g.node < *peer) ++counts[{g.node, *peer}];
      }
    }
    for (const auto& [pair, count] : counts) {
      const int sm = t_.at(pair.first).sm;
      t_.add_link(Link{pair.first, pair.second, LinkKind::nvlink, count, count * nvlink_GBps(sm),
                       count * nvlink_nccl_GBps(sm)});
    }
  }

  void levels() {
    for (const Gpu& a : gpus_) {
      for (const Gpu& b : gpus_) {
        if (a.node >= b.node) continue;
        const auto key = std::make_pair(a.node, b.node);
        int level = 0;
        if (api_.ancestor(a.handle, b.handle, &level) == kSuccess && level >= 10 && level <= 50) {
          t_.reported_levels[key] = static_cast<PciLevel>(level / 10);
        }
        int status = 0;
        if (api_.p2p && api_.p2p(a.handle, b.handle, kP2pCapsRead, &status) == kSuccess) {
          t_.reported_p2p[key] = p2p_text(status);
        }
      }
    }
  }

 private:
  int cpu_from_affinity(nvmlDevice_t h) const {
    const std::vector<int> cpus = t_.cpus();
    std::array<unsigned long, 16> mask{};
    if (!api_.cpu_affinity || api_.cpu_affinity(h, mask.size(), mask.data()) != kSuccess) {
      return cpus.empty() ? -1 : cpus.front();
    }
    for (int c : cpus) {
      for (int cpu : parse_cpu_list(t_.at(c).cpus)) {
        const auto word = static_cast<std::size_t>(cpu) / (8 * sizeof(unsigned long));
        if (word < mask.size() && (mask[word] >> (cpu % (8 * sizeof(unsigned long)))) & 1ul) return c;
      }
    }
    return cpus.empty() ? -1 : cpus.front();
  }

  const Api& api_;
  Topology& t_;
  std::vector<Gpu> gpus_;
};

}  // namespace

std::string nvml_library_path(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* env = std::getenv("MCI_NVML_LIBRARY");
  return env && *env ? env : "libnvidia-ml.so.1";
}

bool add_nvml(Topology& t, const std::string& library) {
  Library lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    const char* why = dlerror();
    t.no_gpu_reason = fmt::format(
        "NVML could not be loaded ({}): no NVIDIA driver is installed here; install it, or "
        "set MCI_NVML_LIBRARY to its libnvidia-ml.so.1",
        why ? why : library);
    return false;
  }
  Api api;
  const bool complete = bind(lib.get(), "nvmlInit_v2", api.init) && bind(lib.get(), "nvmlShutdown", api.shutdown) &&
                        bind(lib.get(), "nvmlDeviceGetCount_v2", api.count) &&
                        bind(lib.get(), "nvmlDeviceGetHandleByIndex_v2", api.handle) &&
                        bind(lib.get(), "nvmlDeviceGetPciInfo_v3", api.pci) &&
                        bind(lib.get(), "nvmlDeviceGetName", api.name) &&
                        bind(lib.get(), "nvmlDeviceGetTopologyCommonAncestor", api.ancestor) &&
                        bind(lib.get(), "nvmlDeviceGetNvLinkState", api.link_state) &&
                        bind(lib.get(), "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.remote_pci);
  // Optional: older drivers lack some; the rest still answers.
  bind(lib.get(), "nvmlErrorString", api.error_string);
  bind(lib.get(), "nvmlDeviceGetCudaComputeCapability", api.capability);
  bind(lib.get(), "nvmlDeviceGetNvLinkRemoteDeviceType", api.remote_type);
  bind(lib.get(), "nvmlDeviceGetCpuAffinity", api.cpu_affinity);
  bind(lib.get(), "nvmlDeviceGetP2PStatus", api.p2p);
  if (!complete) {
    t.no_gpu_reason =
        fmt::format("{} lacks NVML functions mci-topo needs (driver too old?); update the NVIDIA driver", library);
    return false;
  }
  const nvmlReturn_t r = api.init();
  if (r == kDriverNotLoaded) {
    t.no_gpu_reason =
        "NVML found no loaded NVIDIA driver (NVML_ERROR_DRIVER_NOT_LOADED): load it (modprobe nvidia) "
        "or check `nvidia-smi`";
    return false;
  }
  if (r != kSuccess) {
    t.no_gpu_reason = "nvmlInit failed: " + nvml_error(api, r) + "; check `nvidia-smi`";
    return false;
  }
  Session session{api};
  unsigned count = 0;
  if (const nvmlReturn_t c = api.count(&count); c != kSuccess || count == 0) {
    t.no_gpu_reason = c != kSuccess ? "nvmlDeviceGetCount failed: " + nvml_error(api, c)
                                    : "the NVIDIA driver is loaded but NVML lists no GPU (none passed to this "
                                      "machine or container?)";
    return false;
  }
  Merger m(api, t);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    if (api.handle(i, &h) == kSuccess) m.gpu(i, h);
  }
  m.links();
  m.levels();
  t.source += ", NVML";
  return true;
}

}  // namespace mci::topo
