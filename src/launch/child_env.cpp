#include "launch/child_env.hpp"

#include <map>
#include <optional>

#include "common/auth.hpp"

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

std::vector<std::string> child_environment(const std::vector<std::string>& base, const JobConfig& job,
                                           int local_rank, const std::string& token, bool set_omp) {
  // nullopt removes the variable.
  std::map<std::string, std::optional<std::string>> set{
      {"RANK", std::to_string(job.rank_of(local_rank))},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(job.world_size())},
      {"LOCAL_WORLD_SIZE", std::to_string(job.nproc_per_node)},
      {"GROUP_RANK", std::to_string(job.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(job.nnodes)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"MCI_STORE_HOSTED", "1"},
      {"MCI_JOB_TOKEN", token.empty() ? std::nullopt : std::optional<std::string>(token)},
  };
  if (set_omp) set.emplace("OMP_NUM_THREADS", std::string("1"));

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
