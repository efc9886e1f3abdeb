// Joining a job: init_process_group() finds the store, meets every peer and
// returns the group.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mci/backend_caps.hpp"
#include "mci/process_group.hpp"
#include "mci/store.hpp"

namespace mci {

struct InitOptions {
  // "cpu" (mci's engine), "gloo" (the Gloo library), "nccl" (NVIDIA NCCL),
  // "mpi" (the job's MPI library); list_backends() says which are built.
  std::string backend = "cpu";
  // "env://" reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK and
  // LOCAL_WORLD_SIZE when set); "tcp://host:port" takes rank and world_size
  // from the fields below.
  std::string init_method = "env://";
  int rank = -1;
  int world_size = -1;
  // Bounds every wait of the group: rendezvous, collectives, point-to-point.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Operations kept by the flight recorder (for the hang report).
  std::size_t flight_recorder_entries = 2048;
  // Groups with different names never share keys or connections.
  std::string group_name = "default";
  // The GPU this rank uses with backend nccl (and for device buffers);
  // -1: LOCAL_RANK, as one process per GPU wants.
  int device = -1;
  // Use this store instead of the init method's (rank and world_size then
  // come from the fields above).
  std::shared_ptr<Store> store;
  // Authenticates the group's data connections; empty: MCI_JOB_TOKEN.
  std::string token;
  // mci's settings by their variable's name (docs/env.md, "Tuning and
  // diagnostics"), e.g. {{"MCI_ALGO", "ring"}}: a value given here wins over
  // the environment, which is the fallback. A name that is not a setting is
  // a ConfigError; list_settings() names them.
  std::map<std::string, std::string> settings;
};

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& opts = {});

// A process started in a lost rank's place (mcirun --on-rank-loss=replace
// sets MCI_REPLACEMENT): instead of forming a new group, it joins the job's
// running group when its members next grow it (ProcessGroup::grow, at a
// step boundary), as its last rank. Reaches the store as init_process_group
// does (env://: MASTER_ADDR, MASTER_PORT; its RANK is not used); waits at
// most opts.timeout. Then take the model from the others
// (DistributedDataParallel::sync_replicas).
std::shared_ptr<ProcessGroup> join_running_group(const InitOptions& opts = {});
// Whether this process is such a replacement (MCI_REPLACEMENT is set).
bool is_replacement();

// The options for joining a group of world_size through the TCP store at
// host:port (the StoreServer that rank 0 or a launcher runs): a client of
// it whose every wait, connecting included, is bounded by `timeout`, as the
// group's waits are, and the token for both. Bindings that take these
// values as arguments (the C interface, the torch extension) start from
// it, then set backend, group_name and settings.
InitOptions options_through_store(const std::string& host, int port, const std::string& token, int rank, int world_size,
                                  std::chrono::milliseconds timeout);

// Whether env:// would find this process's place: RANK/WORLD_SIZE, or the
// variables of a launcher (srun, mpirun, ...). Tools that can also run alone
// (mci-perf, as nccl-tests do) make a one-rank job when it is false.
bool launched_as_a_job();

// Backends this build contains ("cpu" always; "gloo", "nccl", "mpi" when
// their libraries were found at configure).
bool backend_available(const std::string& name);

struct BackendInfo {
  std::string name;         // what InitOptions::backend takes
  std::string description;  // one line
  bool built = false;       // part of this build
  std::string needs;        // what a build needs installed to contain it ("" for nothing)
  BackendCaps caps;         // what it does (mci/backend_caps.hpp)
};
// Every backend mci knows, built or not, in a stable order.
std::vector<BackendInfo> list_backends();
// One backend's row, built or not; nullopt for a name mci does not know.
std::optional<BackendInfo> find_backend_info(const std::string& name);

// One of mci's settings, from the settings table (docs/env.md lists them).
struct SettingInfo {
  std::string name;                  // the variable, e.g. "MCI_ALGO"
  std::string default_value;         // as the variable would spell it ("" when unset)
  std::string accepts;               // "auto, shm or tcp", "0 .. 1000000 (microseconds)", "text", "set or unset"
  std::vector<std::string> choices;  // a choice's values ("auto", "shm", "tcp"); empty for the other kinds
  bool ranks_agree = false;          // init refuses ranks whose values differ
  bool settable = false;             // InitOptions::settings takes it (the others are read from the environment)
};
std::vector<SettingInfo> list_settings();

}  // namespace mci
