// The job one mcirun runs its share of: the command line resolved against
// the scheduler's variables, the machine and PATH, and checked for
// consistency before anything starts.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/env_lookup.hpp"
#include "launch/cli.hpp"
#include "launch/program.hpp"
#include "launch/rank_loss.hpp"
#include "launch/torch_version.hpp"
#include "launch/worker_logs.hpp"
#include "topo/binding.hpp"

namespace mci::launch {

constexpr int kDefaultMasterPort = 29500;
constexpr int kDefaultRdzvPort = 29400;  // torchrun's, for --rdzv_endpoint HOST

// --nnodes MIN:MAX with MIN < MAX: the job runs on any number of nodes in
// the range, decided again at each attempt (launch/elastic_rendezvous.hpp).
struct ElasticNodes {
  int min_nodes = 1;
  int max_nodes = 1;
  // Whether this node's mcirun hosts the store: --rdzv_conf is_host, else
  // --node_rank (0 hosts), else nullopt until run_job tries to bind
  // --master_addr:--master_port here (torchrun c10d's rule).
  std::optional<bool> is_host;
  // --rdzv_conf last_call_timeout: on the first start, how long node 0
  // waits for more nodes once MIN have joined (torchrun's default, 30 s).
  std::chrono::milliseconds last_call{std::chrono::seconds(30)};
  // --rdzv_conf keep_alive_interval and keep_alive_max_attempt: every node
  // but node 0 beats this often; a node silent for interval x attempts is
  // lost (torchrun's defaults: 5 s x 3).
  std::chrono::milliseconds keep_alive{std::chrono::seconds(5)};
  int keep_alive_max_attempt = 3;
  std::chrono::milliseconds lost_after() const { return keep_alive * keep_alive_max_attempt; }
};

struct JobConfig {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // 0 with --standalone until the store is bound
  bool standalone = false;
  std::chrono::milliseconds grace{3000};  // --grace, --shutdown-timeout
  bool prefix = false;
  ExecSpec program;
  std::string placement_source;  // "srun" or "mpirun" when they placed this node
  std::string run_id = "none";   // TORCHELASTIC_RUN_ID: --rdzv_id, as torchrun (fresh with --standalone)
  std::string role = "default";  // ROLE_NAME: --role
  // How long another node waits for node 0 (--rdzv_conf join_timeout).
  std::chrono::milliseconds join_timeout{std::chrono::minutes(10)};
  // --local-addr: on node 0, the MASTER_ADDR the processes get.
  std::optional<std::string> local_addr;
  bool virtual_local_rank = false;
  // --max-restarts: how many times a failed job is started again, every
  // process on every node (torchrun's semantics); 0: a failure ends it.
  int max_restarts = 0;
  // --on-rank-loss: whether a rank's loss stops the job (and restarts it,
  // with max_restarts) or the others go on (and, under replace, a new
  // process takes its place); MCI_ON_RANK_LOSS for the ranks.
  OnRankLoss on_rank_loss = OnRankLoss::stop;
  // Under replace: how many replacements this node starts at most
  // (--max-restarts=N, which then restarts nothing else: max_restarts is 0),
  // and whether --max-restarts said so rather than the default.
  int max_replacements = kDefaultMaxReplacements;
  bool max_replacements_given = false;
  // The signals that stop the job (passed on to the processes), and their
  // list as torchrun gives it to its workers (TORCHELASTIC_SIGNALS_TO_HANDLE).
  std::vector<int> stop_signals;
  std::string stop_signals_text = kDefaultStopSignals;
  LogOptions logs;
  // One line each for mcirun to print before the job starts: what a
  // torchrun flag does not do here.
  std::vector<std::string> notices;
  // Set by run_job before the ranks start: MASTER_ADDR and MASTER_PORT for
  // the program (a free port node 0 reserves, not the store's: torch's
  // TCPStore binds it), the folder of the ranks' TORCHELASTIC_ERROR_FILEs,
  // the log folder (--log-dir, -r, -t), and the program's torch.
  std::string program_addr;
  int program_port = 0;
  int restart_count = 0;  // this attempt: TORCHELASTIC_RESTART_COUNT
  std::string error_dir;
  std::string log_attempt_dir;
  std::optional<TorchVersion> torch;
  // Node 0's launcher hosts torch's store (torch_store.hpp): the ranks get
  // TORCHELASTIC_USE_AGENT_STORE=True. Every node decides alike: a Python
  // program with torch whose job goes on after a lost rank.
  bool agent_store = false;
  // GLOO_SOCKET_IFNAME for the program when it has none: in a multi-node
  // job, the interface toward node 0 (gloo otherwise binds to whatever the
  // host name resolves to, often a loopback address).
  std::string gloo_ifname;
  topo::BindMode bind = topo::BindMode::none;
  // --monitor (or MCI_MONITOR): where node 0 serves the job's page.
  struct Monitor {
    std::string host = "127.0.0.1";
    int port = 0;       // 0: a free one
    bool open = false;  // MCI_MONITOR_OPEN: another host without a token, on purpose
  };
  std::optional<Monitor> monitor;
  // Elastic jobs: the range; nnodes and node_rank are then this attempt's
  // GROUP_WORLD_SIZE and GROUP_RANK (nnodes is MAX before the first), and
  // first_rank and world its ranks (the nodes may run different
  // --nproc_per_node: torchrun numbers them by a running sum).
  std::optional<ElasticNodes> elastic;
  int first_rank = -1;
  int world = -1;

  int world_size() const { return world >= 0 ? world : nnodes * nproc_per_node; }
  int rank_of(int local_rank) const { return (first_rank >= 0 ? first_rank : node_rank * nproc_per_node) + local_rank; }
  bool hosts_store() const { return elastic ? elastic->is_host.value_or(false) : node_rank == 0; }
};

// --nproc_per_node: a number >= 1, cpu, gpu or auto. Throws UsageError for
// junk and ConfigError for gpu when none is visible.
// named: how messages name the option.
int resolve_nproc(const std::string& spec, const EnvLookup& env, const std::string& dev_dir = "/dev",
                  const std::string& named = "--nproc_per_node");

// HOST[:PORT] or [IPV6][:PORT]; the port defaults to default_port.
std::pair<std::string, int> parse_endpoint(const std::string& endpoint, int default_port);

// Throws UsageError for flags that contradict each other or mean nothing,
// ConfigError for a scheduler environment mcirun cannot use, CannotRun
// when the program is missing.
JobConfig resolve_job(const CliArgs& args, const EnvLookup& env, const std::string& dev_dir = "/dev");

}  // namespace mci::launch
