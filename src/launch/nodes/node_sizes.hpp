// How many processes each node of a static multi-node job runs, agreed
// through the job's store before any rank starts, as torchrun's agents
// share their local world sizes: nodes may run different --nproc_per_node
// (2 + 1 + 2), and ranks are numbered node after node by a running sum.
// Every node arrives with its (node_rank, nproc) at mcirun/nodes
// (DecideOnce); the first node to see all of them fixes the list, and
// every node numbers its ranks from that one list.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "launch/ranks/signals.hpp"
#include "mci/store.hpp"

namespace mci::launch {

struct NodeSizes {
  std::vector<int> nproc;  // by node rank
  // Where node 0 sees node 1 from (the address node 1 reached the store
  // from; node 0 only, and only with a node 1): the route toward it is the
  // interface node 0's processes are reached at, whatever node 0's own name
  // resolves to here (127.0.1.1 under Debian's /etc/hosts).
  std::string other_node_addr;
  int first_rank(int node_rank) const;
  int world() const;
};

struct NodeSizesOptions {
  StoreAddress store;  // node 0's
  int nnodes = 1;
  int node_rank = 0;
  int nproc = 1;
  bool hosts_store = false;  // this launcher hosts the store (node 0)
  // Where another node's failure is published (NodeLink's failed key): a
  // node that refused to start (another --on-rank-loss) never arrives.
  std::string news_key;
  std::chrono::milliseconds wait_limit{std::chrono::minutes(10)};  // --rdzv_conf join_timeout
};

// nullopt when a stop signal came meanwhile (*stop_signal says which) or
// another node published a failure (*news holds it, as the store has it).
// Throws mci::Error when two launchers claim one --node_rank, and
// TimeoutError naming the nodes missing after wait_limit.
std::optional<NodeSizes> agree_node_sizes(const NodeSizesOptions& o, SignalFd& signals, int* stop_signal,
                                          std::string* news);

inline constexpr const char* kNodeSizesBase = "mcirun/nodes";

}  // namespace mci::launch
