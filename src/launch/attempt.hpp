// What mcirun learns while it runs, kept apart from what it was told
// (JobConfig, which never changes after parsing): where the job's store is,
// found or bound before anything starts (JobStore), and one start of the
// job on this node (Attempt): the nodes and ranks taking part, the
// program's endpoint and torch, the start's count and its error and log
// folders. Every attempt is made from the one before; the processes of an
// attempt are placed from it alone (child_env.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "launch/config/torch_version.hpp"
#include "mci/store.hpp"

namespace mci::launch {

struct JobConfig;

// The job's store as this node reaches it: node 0 has bound it (so the port
// is known even under --standalone, which asks for any), the others reach
// it at --master_addr:--master_port. The token is MCI_JOB_TOKEN, or the
// one-node job's own; empty: unauthenticated.
struct JobStore : StoreAddress {
  // This node leads the job's setup and end (node 0): it hosts mci's own
  // store, or, on etcd, publishes the program's port and waits for the
  // other nodes at the end.
  bool hosted_here = false;
  // The store lives on etcd, reached at this node's relay: no node holds it,
  // and node 0 is lost like any other.
  bool replicated = false;
  // On etcd: why the relay last failed to reach it (StoreRelay::trouble),
  // what this node says when its store connections close.
  std::function<std::string()> trouble;
};

struct Attempt {
  int index = 0;  // TORCHELASTIC_RESTART_COUNT: 0 for the first start
  // This attempt's nodes (GROUP_WORLD_SIZE), this node's place among them
  // (GROUP_RANK), the rank of its local rank 0 and the ranks in all: under
  // --nnodes MIN:MAX decided again each attempt (the nodes may run
  // different --nproc_per_node: ranks are numbered by a running sum).
  int nnodes = 1;
  int node_rank = 0;
  int first_rank = 0;
  int world = 1;
  int nproc_per_node = 1;
  JobStore store;
  // MASTER_ADDR and MASTER_PORT for the program: a free port node 0
  // reserves (torch's TCPStore binds it), not the store's.
  std::string program_addr;
  int program_port = 0;
  // The program's torch (a Python program only), and whether node 0's
  // launcher hosts torch's store (torch_store.hpp): a torch job that goes on
  // after a lost rank.
  std::optional<TorchVersion> torch;
  bool agent_store = false;
  // GLOO_SOCKET_IFNAME for a multi-node job's processes that have none: the
  // interface toward node 0 (on node 0: toward node 1).
  std::string gloo_ifname;
  // MCI_HOST_ADDR for node 0's processes, whose route to the store (on this
  // node) is loopback: the address toward node 1, which the other nodes
  // reach. Empty elsewhere, and where the user named an address or an
  // interface.
  std::string host_addr;
  // The ranks' TORCHELASTIC_ERROR_FILEs: in mcirun's own folder for this
  // attempt (error_dir), or, with --log-dir, in the attempt's log folder.
  std::string error_dir;
  std::string log_dir;

  int rank_of(int local_rank) const { return first_rank + local_rank; }
  bool keeps_error_files() const { return !error_dir.empty() || !log_dir.empty(); }
};

// The first attempt of a job whose nodes the configuration names (a static
// job: its ranks numbered node by node); under --nnodes MIN:MAX the
// rendezvous renumbers each attempt.
Attempt first_attempt(const JobConfig& job, JobStore store);

}  // namespace mci::launch
