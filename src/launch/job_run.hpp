// One mcirun's share of the job, as named phases:
//   check_limits        the job's open files fit (the ranks inherit ours);
//   reach_store         node 0 hosts the job's store, the others find it
//                       (on etcd: every node serves its own relay to it);
//   agree_program_port  node 0 reserves the program's MASTER_PORT, the
//                       others read it (and --on-rank-loss must agree);
//   agree_node_sizes    the nodes of a static multi-node job share how many
//                       processes each runs (node_sizes.hpp): the ranks'
//                       numbering and the world size;
//   prepare_node        what every attempt reuses: log folders, the
//                       program's torch, torch's store under a loss policy,
//                       CPU placement, --monitor, the elastic rendezvous;
// then, per attempt: meet (the nodes of --nnodes MIN:MAX, or every node
// back after a restart), start and supervise the ranks (Supervisor), and
// decide whether to start again (--max-restarts). A phase that ends the job
// returns mcirun's exit code; what the phases learn goes into the Attempt
// every start is made from (attempt.hpp), never into the configuration.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/env_lookup.hpp"
#include "launch/attempt.hpp"
#include "launch/config/job_config.hpp"
#include "launch/nodes/elastic_rendezvous.hpp"
#include "launch/nodes/program_port.hpp"
#include "launch/nodes/torch_store.hpp"
#include "launch/output/fr_dumps.hpp"
#include "launch/output/worker_logs.hpp"
#include "launch/ranks/signals.hpp"
#include "store/node_presence.hpp"

namespace mci {
class StoreServer;
class StoreRelay;
}  // namespace mci
namespace mci::jobview {
class JobMonitor;
}

namespace mci::launch {

class Guardian;

class JobRun {
 public:
  // signals: made before the store's thread starts (which must inherit
  // their mask).
  // guardian: may be null (none could be started).
  JobRun(const JobConfig& job, const EnvLookup& env, SignalFd& signals, Guardian* guardian);
  ~JobRun();
  JobRun(const JobRun&) = delete;
  JobRun& operator=(const JobRun&) = delete;

  // The phases in order; mcirun's exit code.
  int run();

 private:
  // Each returns an exit code when the job ends there, nullopt to go on.
  std::optional<int> check_limits();
  std::optional<int> reach_store();
  std::optional<int> reach_etcd(JobStore& s);
  void say_where() const;
  std::optional<int> agree_program_port();
  std::optional<int> agree_node_sizes();
  std::optional<int> prepare_node();
  void choose_interfaces();
  std::optional<int> probe_torch_and_store();
  std::optional<int> start_monitor();

  int run_attempts();
  // --nnodes MIN:MAX: the nodes that meet for the attempt numbered from
  // `a.index` on (a late node gets a later one) fill a's membership.
  std::optional<int> meet_elastic(Attempt& a);
  // On etcd: the attempt's GROUP_RANK 0 leads it and publishes the
  // program's MASTER_ADDR/MASTER_PORT; the others read them.
  std::optional<int> agree_attempt_endpoint(Attempt& a, const Membership& m);
  // One attempt, from its folders to its supervisor's exit code.
  struct Outcome {
    std::optional<int> ended;  // the job ends here, with this code, before or without a supervisor
    int rc = 0;
    bool rank_failed = false;
    std::string failure_line;
  };
  static Outcome ended(int rc);
  Outcome run_attempt(const Attempt& a);
  // After a failed attempt: the history, and whether to start again.
  std::optional<int> decide(const Attempt& a, const Outcome& out);
  // over: the job's end is decided (not this node's own stop signal).
  int finish(int rc, bool over);

  const JobConfig& job_;
  const EnvLookup& env_;
  SignalFd& signals_;
  Guardian* guardian_;
  Attempt base_;  // what every attempt is made from
  bool set_omp_ = false;
  std::unique_ptr<StoreServer> store_;
  std::unique_ptr<StoreRelay> relay_;  // --rdzv_backend=etcd: this node's door to the store
  // --max-restarts or --on-rank-loss=replace on several nodes, or --monitor
  // with a store on etcd: this mcirun's presence, which tells a restarting node (join_attempt), or on etcd the
  // monitor of the next node, or the node that adopts its ranks
  // (nodes/node_adopter.hpp), that it is gone (store/node_presence.hpp).
  std::optional<NodePresence> presence_;
  // Where this node's processes reach the others: toward node 0, or, on
  // etcd, toward its first member.
  std::string toward_;
  // Node 0: where node 1 reached the store from (node_sizes.hpp).
  std::string other_node_addr_;
  // How many ranks each node runs (the nodes' agreement, node_sizes.hpp):
  // where a node lost whole under replace has its ranks (NodeAdopter).
  std::vector<int> node_nproc_;
  // Node 0 holds the program's port until the job ends, so that no other
  // job can be handed it before rank 0 binds it (program_port.hpp).
  std::optional<PortReservation> program_port_;
  std::optional<LogFolders> folders_;
  std::string python_path_;
  std::vector<std::string> env_base_;  // mcirun's environment, for every rank
  std::optional<TorchStoreKeeper> torch_store_;
  std::vector<std::vector<int>> cpus_;
  std::string host_;
  std::unique_ptr<jobview::JobMonitor> monitor_;
  std::optional<FrDumps> dumps_;
  std::unique_ptr<ElasticRendezvous> rdzv_;
  std::optional<Membership> members_;                  // the last attempt's nodes, under --nnodes MIN:MAX
  std::vector<std::pair<int, std::string>> failures_;  // each failed attempt's, for the last summary
};

}  // namespace mci::launch
