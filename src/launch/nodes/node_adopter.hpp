// --on-rank-loss=replace on several nodes: a node lost whole (its host, or
// its mcirun killed with its ranks) leaves ranks that no launcher of theirs
// can start again. Every node watches the others' presence in the job's
// store (store/node_presence.hpp: the store itself records that every
// connection of a node's mcirun closed; on etcd, another node's relay once
// that node's lease is gone), and the first surviving node to claim a gone
// node (compare_set on mcirun/adopt/NODE of the attempt) starts that node's
// ranks again on itself, as replacements (Supervisor::adopt_nodes). So node
// 0 lost on etcd, or any node on either store, costs no rank for good.
// A node that said it finished (mcirun/done/NODE) is not adopted, nor one
// only cut off: its connections stay open (on etcd, its lease lives until
// it expires, and then its own ranks have lost the control plane and stop).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/socket.hpp"
#include "mci/store.hpp"

namespace mci::launch {

struct NodeAdopterOptions {
  StoreAddress store;
  int nnodes = 1;
  int node_rank = 0;
  int attempt = 0;
  std::vector<int> nproc;               // ranks of each node: a claim needs room for all of them
  std::chrono::milliseconds poll{100};  // how often each other node's presence is read
};

class NodeAdopter {
 public:
  explicit NodeAdopter(NodeAdopterOptions o);
  ~NodeAdopter();
  NodeAdopter(const NodeAdopter&) = delete;
  NodeAdopter& operator=(const NodeAdopter&) = delete;

  // Readable when this node claimed a gone node; take() then says which.
  int fd() const { return wake_read_.get(); }
  std::vector<int> take();
  // How many more replacements this node may start (its cap, less those
  // started or pending): a node is claimed only with room for all its
  // ranks, so that a claim is never one this node cannot keep.
  void set_room(int replacements) { room_.store(replacements); }
  // No more claims (the node's processes are stopping, or all exited):
  // another node claims what this one no longer would.
  void refuse() { accepting_.store(false); }

 private:
  void run();
  // One round over the nodes not settled yet; what this node claimed goes
  // to claimed_ as soon as the store has answered.
  void look(Store& store);

  NodeAdopterOptions o_;
  Fd wake_read_, wake_write_;
  std::vector<bool> settled_;  // by node: claimed (by anyone), or finished
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<int> claimed_;  // guarded by mu_
  std::atomic<int> room_{0};
  std::atomic<bool> accepting_{true};
  std::thread thread_;
};

}  // namespace mci::launch
