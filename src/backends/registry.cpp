#include "backends/registry.hpp"

#include <array>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

// Each backend's factory is defined in its folder and declared only here,
// beside its row: a backend is its folder and its row. An optional one's
// MCI_HAVE_X comes from its backend.cmake when its library was found; its
// row says "not built" otherwise, with no factory.
using Factory = std::unique_ptr<Backend> (*)(const BackendContext&);
std::unique_ptr<Backend> make_cpu_backend(const BackendContext& ctx);
#ifdef MCI_HAVE_GLOO
std::unique_ptr<Backend> make_gloo_backend(const BackendContext& ctx);
constexpr Factory kGloo = &make_gloo_backend;
constexpr bool kHaveGloo = true;
#else
constexpr Factory kGloo = nullptr;
constexpr bool kHaveGloo = false;
#endif
#ifdef MCI_HAVE_NCCL
std::unique_ptr<Backend> make_nccl_backend(const BackendContext& ctx);
constexpr Factory kNccl = &make_nccl_backend;
constexpr bool kHaveNccl = true;
#else
constexpr Factory kNccl = nullptr;
constexpr bool kHaveNccl = false;
#endif
#ifdef MCI_HAVE_MPI
std::unique_ptr<Backend> make_mpi_backend(const BackendContext& ctx);
constexpr Factory kMpi = &make_mpi_backend;
constexpr bool kHaveMpi = true;
#else
constexpr Factory kMpi = nullptr;
constexpr bool kHaveMpi = false;
#endif

namespace {

// Designated fields, so that a row says what it is true of; the rest stay
// false. The cpu backend runs every kind (through the algorithm table, whose
// rows say which algorithms serve it); the library backends run the kinds
// their switch has a case for, listed here: a kind added to the list is
// theirs only once they run it.
constexpr OpKindSet kLibraryKinds{OpKind::all_reduce,     OpKind::broadcast,  OpKind::reduce,
                                  OpKind::all_gather,     OpKind::gather,     OpKind::scatter,
                                  OpKind::reduce_scatter, OpKind::all_to_all, OpKind::barrier,
                                  OpKind::send,           OpKind::recv};
constexpr BackendCaps kCpuCaps{.host_memory = true,
                               .cuda_memory = true,
                               .mci_algorithms = true,
                               .mci_transports = true,
                               .fingerprints = true,
                               .reports_arrivals = true,
                               .aborts_running = true,
                               .shrinks = true,
                               .any_source = true,
                               .kinds = OpKindSet::all()};
// Gloo, NCCL and MPI: no recv from any source (mci's p2p on them names the
// peer; the cpu backend matches the first sender in its TCP transport).
// Gloo: abort leaves its reason in the store and breaks the connections; a
// shrink forms a new Gloo context over the store for the survivors.
constexpr BackendCaps kGlooCaps{.host_memory = true, .aborts_running = true, .shrinks = true, .kinds = kLibraryKinds};
// NCCL: ncclCommAbort ends this rank's operations only; the peers learn at
// their timeout, so survivors would not all reach shrink() at once (and no
// GPU here to test a new communicator on).
constexpr BackendCaps kNcclCaps{.cuda_memory = true, .gpu_per_rank = true, .kinds = kLibraryKinds};
// MPI cannot end a peer's operation short of MPI_Abort, which ends the job:
// peers learn at their timeout (mpi_backend.cpp); an MPI job cannot go on
// without a rank (no ULFM).
constexpr BackendCaps kMpiCaps{.host_memory = true, .kinds = kLibraryKinds};

const std::array kBackends{
    BackendEntry{"cpu", "mci's own engine on host memory (shared memory on one host, TCP across hosts)", "", true,
                 &make_cpu_backend, kCpuCaps, ""},
    BackendEntry{"gloo", "the Gloo library on host memory", "libgloo-dev", kHaveGloo, kGloo, kGlooCaps, ""},
    BackendEntry{"nccl", "NVIDIA NCCL on GPU memory, one GPU per rank", "the CUDA toolkit and NCCL", kHaveNccl, kNccl,
                 kNcclCaps,
                 "its peers learn of a failure only at their timeout, so the survivors would not agree at once"},
    BackendEntry{"mpi",
                 "the job's MPI library (Open MPI) on host memory; start the program with mpirun or srun --mpi=pmix",
                 "libopenmpi-dev", kHaveMpi, kMpi, kMpiCaps,
                 "an MPI communicator cannot lose a rank: MPI has no shrink without ULFM"},
};

}  // namespace

std::span<const BackendEntry> backend_table() noexcept { return kBackends; }

const BackendEntry* find_backend(std::string_view name) noexcept {
  for (const auto& b : kBackends) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::string backend_names() {
  std::string out;
  for (const auto& b : kBackends) {
    out += fmt::format("{}{} ({}{})", out.empty() ? "" : ", ", b.name, b.what, b.built ? "" : "; not in this build");
  }
  return out;
}

namespace {

template <class Has>
std::string backends_where(Has has) {
  std::string out;
  for (const auto& b : kBackends) {
    if (has(b.caps)) out += fmt::format("{}{} (MCI_BACKEND={})", out.empty() ? "" : " or ", b.name, b.name);
  }
  return out;
}

}  // namespace

std::string backends_with(bool BackendCaps::*cap) {
  return backends_where([cap](const BackendCaps& c) { return c.*cap; });
}

std::string backends_running(OpKind kind) {
  const std::string out = backends_where([kind](const BackendCaps& c) { return c.kinds.contains(kind); });
  return out.empty() ? "none does in this version of mci" : out;
}

std::optional<std::string> ignored_setting(const BackendEntry& b, const SettingRow& setting, const std::string& value) {
  // The capability each backend-bound use of a setting needs, and how the
  // notice words its absence and its presence.
  struct Needs {
    SettingUse use;
    bool BackendCaps::*cap;
    const char* lacking;
    const char* having;
  };
  static constexpr Needs kNeeds[] = {
      {SettingUse::mci_algorithms, &BackendCaps::mci_algorithms, "which picks its own algorithms",
       "run mci's algorithms"},
      {SettingUse::mci_transports, &BackendCaps::mci_transports, "which has its own transport",
       "run on mci's transports"},
  };
  for (const auto& n : kNeeds) {
    if (n.use != setting.use || b.caps.*n.cap) continue;
    return fmt::format("{}={} is ignored on the {} backend, {}: {} applies to the backends that {}: {}", setting.name,
                       value, b.name, n.lacking, setting.name, n.having, backends_with(n.cap));
  }
  return std::nullopt;
}

void require_host_memory(const char* backend, const coll::CollectiveDesc& d) {
  if (!d.device.is_cuda()) return;
  throw ConfigError(
      fmt::format("the {} backend works on host memory, and this {} buffer is on {}; use a backend "
                  "that takes GPU memory: {}",
                  backend, op_name(d.kind), d.device.str(), backends_with(&BackendCaps::cuda_memory)));
}

void require_kind(const BackendEntry& b, OpKind kind) {
  if (!b.caps.kinds.contains(kind)) refuse_kind(b.name, kind);
}

void refuse_kind(std::string_view backend, OpKind kind) {
  throw ConfigError(fmt::format("the {} backend does not run {}; use a backend that does: {}", backend, op_name(kind),
                                backends_running(kind)));
}

void require_any_source(std::string_view backend, const coll::CollectiveDesc& d) {
  if (!d.from_any_source()) return;
  const BackendEntry* b = find_backend(backend);
  if (b && b->caps.any_source) return;
  throw ConfigError(
      fmt::format("the {} backend cannot receive from any source (recv with src = mci::any_source, or torch's "
                  "dist.recv without src): pass src=<the sending rank>, or use a backend that can: {}",
                  backend, backends_with(&BackendCaps::any_source)));
}

const BackendEntry& require_backend(std::string_view name) {
  const BackendEntry* b = find_backend(name);
  if (!b) throw ConfigError(fmt::format("unknown backend '{}': use {}", name, backend_names()));
  if (!b->built) {
    throw ConfigError(
        fmt::format("backend '{}' is not part of this build of mci ({} was not found when it was "
                    "configured); use backend 'cpu', mci's own engine, or rebuild with {} installed",
                    name, b->needs, b->needs));
  }
  return *b;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendContext& ctx) {
  return require_backend(name).make(ctx);
}

}  // namespace mci
