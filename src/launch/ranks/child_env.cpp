#include "launch/ranks/child_env.hpp"

#include <map>
#include <optional>

#include "common/auth.hpp"
#include "launch/output/error_files.hpp"
#include "launch/output/worker_logs.hpp"

extern char** environ;

namespace mci::launch {

std::string choose_token(const EnvLookup& env, int nnodes) {
  if (auto t = env("MCI_JOB_TOKEN"); t && !t->empty()) return *t;
  if (nnodes == 1) return auth::new_token();
  return {};
}

bool omp_default_needed(const EnvLookup& env, int nproc_per_node) {
  return nproc_per_node > 1 && !env("OMP_NUM_THREADS");
}

std::string omp_banner() {
  return "mcirun: OMP_NUM_THREADS is not set: each process gets OMP_NUM_THREADS=1 so that the "
         "processes of this node do not overload its CPUs; export OMP_NUM_THREADS to choose "
         "another value.";
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

namespace {

EnvLookup environment_of(const std::vector<std::string>& base) {
  std::map<std::string, std::string> vars;
  for (const auto& kv : base) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return fixed_env(std::move(vars));
}

}  // namespace

std::string error_file(const Attempt& a, int local_rank) { return error_file(a, local_rank, a.rank_of(local_rank)); }

std::string error_file(const Attempt& a, int local_rank, int rank) {
  if (!a.log_dir.empty()) return log_error_file(a.log_dir, local_rank);
  return error_file_path(a.error_dir, rank);
}

namespace {

// --virtual-local-rank: the GPU a process sees as its only one (torchrun's
// rule: its entry of the visible list, else its local rank).
std::string own_gpu(const EnvLookup& inherited, const char* var, int local_rank) {
  const auto list = inherited(var);
  if (!list) return std::to_string(local_rank);
  const std::vector<std::string> gpus = split_list(*list);
  if (local_rank >= static_cast<int>(gpus.size())) return std::to_string(local_rank);  // resolve_job refused this
  std::string gpu = gpus[static_cast<std::size_t>(local_rank)];
  while (!gpu.empty() && gpu.front() == ' ') gpu.erase(gpu.begin());
  while (!gpu.empty() && gpu.back() == ' ') gpu.pop_back();
  return gpu;
}

}  // namespace

std::vector<std::string> child_environment(const std::vector<std::string>& base, const JobConfig& job, const Attempt& a,
                                           int local_rank, bool set_omp, const std::string& python_path) {
  const EnvLookup inherited = environment_of(base);
  const std::string rank = std::to_string(a.rank_of(local_rank));
  const std::string world = std::to_string(a.world);
  const std::string& token = a.store.token;
  // nullopt removes the variable.
  std::map<std::string, std::optional<std::string>> set{
      {"RANK", rank},
      {"LOCAL_RANK", job.virtual_local_rank ? "0" : std::to_string(local_rank)},
      {"WORLD_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(job.nproc_per_node)},
      {"GROUP_RANK", std::to_string(a.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(a.nnodes)},
      {"ROLE_RANK", rank},
      {"ROLE_WORLD_SIZE", world},
      {"ROLE_NAME", job.role},
      {"MASTER_ADDR", a.program_addr.empty() ? a.store.host : a.program_addr},
      {"MASTER_PORT", std::to_string(a.program_port)},
      {"MCI_STORE_ADDR", a.store.host},
      {"MCI_STORE_PORT", std::to_string(a.store.port)},
      {"MCI_STORE_HOSTED", "1"},
      {"MCI_JOB_TOKEN", token.empty() ? std::nullopt : std::optional<std::string>(token)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(a.index)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(job.max_restarts)},
      {"TORCHELASTIC_RUN_ID", job.run_id},
      // Who hosts torch's store on MASTER_PORT: node 0's launcher when the
      // job goes on after a lost rank (torch_store.hpp), else rank 0 of the
      // program, as under torchrun's standalone rendezvous; an inherited
      // value must not leak in.
      {"TORCHELASTIC_USE_AGENT_STORE", a.agent_store ? "True" : "False"},
      // With the job's store on etcd, torch's own store goes there too
      // (through this node's relay) for a program on mci_torch, which routes
      // env:// to it (mci_torch/_torch_store.py): no node holds it, node 0
      // included. Other programs keep MASTER_ADDR:MASTER_PORT.
      {"MCI_TORCH_STORE", a.store.replicated ? std::optional<std::string>("mci") : std::nullopt},
      {"TORCHELASTIC_ERROR_FILE",
       a.keeps_error_files() ? std::optional<std::string>(error_file(a, local_rank)) : std::nullopt},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", job.stop_signals_text},
      // A program that shrinks its group in place when a peer is lost needs
      // to know that the launcher lets the survivors go on.
      {"MCI_ON_RANK_LOSS", on_rank_loss_name(job.on_rank_loss)},
      // Set for a replacement only (launch/config/rank_loss.hpp): an inherited one
      // must not make a first start read as a replacement.
      {"MCI_REPLACEMENT", std::nullopt},
  };
  // torch 2.2 and later read TORCH_NCCL_ASYNC_ERROR_HANDLING (torchrun 2.x
  // sets it) and warn on every rank when the old NCCL_ASYNC_ERROR_HANDLING
  // is set; older torch reads only the old name (torchrun 1.13 sets that).
  if (!inherited("TORCH_NCCL_ASYNC_ERROR_HANDLING")) set.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", std::string("1"));
  if (a.torch && a.torch->reads_old_nccl_names() && !inherited("NCCL_ASYNC_ERROR_HANDLING")) {
    set.emplace("NCCL_ASYNC_ERROR_HANDLING", std::string("1"));
  }
  if (job.virtual_local_rank) {
    const bool hip = inherited("HIP_VISIBLE_DEVICES") && !inherited("HIP_VISIBLE_DEVICES")->empty();
    const std::string gpu = own_gpu(inherited, hip ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES", local_rank);
    set.emplace("CUDA_VISIBLE_DEVICES", gpu);
    if (hip) set.emplace("HIP_VISIBLE_DEVICES", gpu);
  }
  if (set_omp) set.emplace("OMP_NUM_THREADS", std::string("1"));
  if (!a.gloo_ifname.empty() && !inherited("GLOO_SOCKET_IFNAME")) set.emplace("GLOO_SOCKET_IFNAME", a.gloo_ifname);
  if (!a.host_addr.empty() && !inherited("MCI_HOST_ADDR")) set.emplace("MCI_HOST_ADDR", a.host_addr);
  if (!python_path.empty()) {
    const auto old = inherited("PYTHONPATH");
    set.emplace("PYTHONPATH", old && !old->empty() ? python_path + ":" + *old : python_path);
  }

  std::vector<std::string> out;
  out.reserve(base.size() + set.size());
  for (const auto& kv : base) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos && set.count(kv.substr(0, eq))) continue;
    out.push_back(kv);
  }
  for (const auto& [name, value] : set) {
    if (!value) continue;
    std::string kv;  // appended, not operator+: g++ 12 warns (-Wrestrict) on the chain
    kv.reserve(name.size() + 1 + value->size());
    kv.append(name).append(1, '=').append(*value);
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace mci::launch
