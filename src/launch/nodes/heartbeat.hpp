// Liveness of the nodes of an elastic job (--nnodes MIN:MAX), through node
// 0's store, as torchrun's keep-alive:
//   mcirun/elastic/beat/ID  a counter each node other than node 0 adds 1 to
//                           every --rdzv_conf keep_alive_interval;
//   mcirun/elastic/left/ID  set when that node's mcirun leaves the job on its
//                           own (its job ended, a signal), so node 0 need
//                           not wait for its silence.
// Node 0 calls a node lost when it left, when its rendezvous connection
// closed (the store records that close: a SIGKILLed mcirun at once, on etcd
// within its relay's lease), or when its counter has not moved for
// keep_alive_interval x keep_alive_max_attempt: a dead host or a broken
// network may leave a connection open for long, hence the beat as well.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/deadline.hpp"
#include "mci/store.hpp"

namespace mci::launch {

std::string beat_key(int id);
std::string left_key(int id);
// Whether node `id`'s mcirun said it left, or its rendezvous connection
// closed (killed, its host lost): what can be known without waiting for
// its beats' silence.
bool gone_now(Store& store, int id, std::string* why = nullptr);

// A node other than node 0, for as long as it is in the job (waiting to
// join included): beats on a thread and connection of its own; the
// destructor says the node left.
class Heartbeat {
 public:
  Heartbeat(const StoreAddress& store, int id, std::chrono::milliseconds interval);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run();

  TcpStoreOptions store_;
  int id_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Node 0's view of the others' beats.
class BeatTracker {
 public:
  explicit BeatTracker(std::chrono::milliseconds lost_after) : lost_after_(lost_after) {}
  // Whether node `id` is lost; `why` then says how ("left the job", "no
  // heartbeat for 15 s"). A node's silence counts from the first call that
  // asks about it.
  bool lost(Store& store, int id, std::string* why = nullptr);

 private:
  struct Seen {
    std::int64_t count = -1;
    Clock::time_point since;
  };
  std::chrono::milliseconds lost_after_;
  std::map<int, Seen> seen_;
};

// One node of an attempt, as node 0 names it.
struct WatchedNode {
  int group_rank = 0;
  int id = 0;
  std::string host;
  pid_t pid = 0;
};

// Node 0, while an attempt runs on several nodes: the first member that is
// lost (and has not finished) becomes the attempt's failure in the store
// (node_link.hpp's failed key), which stops every node, node 0 included,
// and --max-restarts starts the next attempt without it.
class MemberWatch {
 public:
  MemberWatch(const StoreAddress& store, int attempt, std::vector<WatchedNode> nodes,
              std::chrono::milliseconds lost_after, std::chrono::milliseconds period);
  ~MemberWatch();
  MemberWatch(const MemberWatch&) = delete;
  MemberWatch& operator=(const MemberWatch&) = delete;

  // The node it found lost (its id and why), if it did: the next round
  // need not wait for that node's silence again.
  std::optional<std::pair<int, std::string>> lost_node() const;

 private:
  void run();
  // One look at every node; true once a failure is in the store (ours or
  // another node's): nothing left to watch.
  bool look(TcpStore& store, BeatTracker& beats);

  TcpStoreOptions store_;
  int attempt_;
  std::vector<WatchedNode> nodes_;
  std::chrono::milliseconds lost_after_;
  std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::pair<int, std::string>> lost_;
  std::thread thread_;
};

}  // namespace mci::launch
