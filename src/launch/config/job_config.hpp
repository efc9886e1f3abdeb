// The job one mcirun runs its share of: the command line resolved against
// the scheduler's variables, the machine and PATH, and checked for
// consistency before anything starts. It never changes after parsing:
// what mcirun learns while it runs is in attempt.hpp.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/env_lookup.hpp"
#include "launch/config/cli.hpp"
#include "launch/config/program.hpp"
#include "launch/config/rank_loss.hpp"
#include "launch/output/worker_logs.hpp"
#include "launch/ranks/signals.hpp"
#include "topo/binding.hpp"

namespace mci::launch {

constexpr int kDefaultMasterPort = 29500;
constexpr int kDefaultRdzvPort = 29400;  // torchrun's, for --rdzv_endpoint HOST

// --nnodes MIN:MAX with MIN < MAX: the job runs on any number of nodes in
// the range, decided again at each attempt (launch/nodes/elastic_rendezvous.hpp).
struct ElasticNodes {
  int min_nodes = 1;
  int max_nodes = 1;
  // Whether this node's mcirun hosts the store: --rdzv_conf is_host, else
  // --node_rank (0 hosts), else nullopt until run_job tries to bind
  // --master_addr:--master_port here (torchrun c10d's rule). On etcd no
  // node hosts the store, and this is only a notice's matter.
  std::optional<bool> is_host;
  // --rdzv_conf last_call_timeout: on the first start, how long the node
  // that closes the round (node 0 on mci's store; on etcd, whichever node
  // of the attempt before decides first) waits for more nodes once MIN have
  // joined (torchrun's default, 30 s).
  std::chrono::milliseconds last_call{std::chrono::seconds(30)};
  // --rdzv_conf keep_alive_interval and keep_alive_max_attempt: every node
  // beats this often (on mci's store, every node but node 0, which holds
  // it); a node silent for interval x attempts is lost, unless its store
  // connection closed first, which is a loss at once (torchrun's defaults:
  // 5 s x 3).
  std::chrono::milliseconds keep_alive{std::chrono::seconds(5)};
  int keep_alive_max_attempt = 3;
  std::chrono::milliseconds lost_after() const { return keep_alive * keep_alive_max_attempt; }
};

struct JobConfig {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // 0 with --standalone: any free one (JobStore has the bound port)
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
  topo::BindMode bind = topo::BindMode::none;
  // --monitor (or MCI_MONITOR): where node 0 serves the job's page.
  struct Monitor {
    std::string host = "127.0.0.1";
    int port = 0;       // 0: a free one
    bool open = false;  // MCI_MONITOR_OPEN: another host without a token, on purpose
  };
  std::optional<Monitor> monitor;
  // --nnodes MIN:MAX: the range (nnodes is then MAX, and node_rank what
  // --node_rank said); each attempt's nodes and ranks are in its Attempt.
  std::optional<ElasticNodes> elastic;
  // --rdzv_backend=etcd (or etcd-v2, torchrun's name): the job's store on
  // etcd, reached through a relay on every node (store/store_relay.hpp), so
  // that no node holds it and node 0 is lost like any other.
  struct Etcd {
    std::vector<std::string> endpoints;                               // HOST:PORT of its members (--rdzv_endpoint)
    std::chrono::milliseconds read_timeout{std::chrono::seconds(5)};  // --rdzv_conf read_timeout
    std::chrono::seconds lease_ttl{2};  // MCI_ETCD_LEASE_TTL: how soon a lost node's certificates come
    // --rdzv_conf protocol=https (or https:// endpoints), cacert, cert, key.
    bool https = false;
    std::string cacert, cert, key;
    std::string prefix = "/mci";  // --rdzv_conf etcd_prefix: where the jobs' keys live
  };
  std::optional<Etcd> etcd;

  // As the command line places this node when every node runs as many
  // processes: a guess until the nodes agree on their counts (a static
  // multi-node job: node_sizes.hpp; an elastic one's attempts: attempt.hpp).
  int world_size() const { return nnodes * nproc_per_node; }
  int rank_of(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
  // Whether the configuration says this node hosts the store; under
  // --nnodes MIN:MAX without is_host or --node_rank, binding decides
  // (JobStore::hosted_here).
  bool hosts_store() const { return !etcd && (elastic ? elastic->is_host.value_or(false) : node_rank == 0); }
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
