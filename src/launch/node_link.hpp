// How the launchers of a multi-node job learn about each other through the
// job's store on node 0, so one node's failure stops every node:
//   mcirun/failed      "NODE|what happened", set once by the first node whose
//                      process fails (compare_set: the first report wins);
//                      every other launcher waits on it and stops its own.
//   mcirun/done/NODE   set when all of a node's processes exited 0; node 0
//                      keeps the store up until every node has said so (or
//                      failed), like torchrun's exit barrier.
// The store calls block, so they run on a thread of their own; the event
// loop learns of news through fd(), a pipe it polls with everything else.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/socket.hpp"

namespace mci::launch {

struct NodeLinkOptions {
  std::string host;
  int port = 0;
  std::string token;
  int nnodes = 1;
  int node_rank = 0;
  std::chrono::milliseconds slice{100};  // longest a store call holds the thread
};

class NodeLink {
 public:
  enum class EventKind {
    peer_failed,  // another node's process failed (text: what it reported)
    all_done,     // node 0: every node's processes exited 0
    store_lost,   // the store went away after we reached it: node 0's launcher is gone
    unreachable,  // the store could not be used at all (bad address or token)
  };
  struct Event {
    EventKind kind;
    std::string text;
  };

  explicit NodeLink(NodeLinkOptions opts);
  // Publishes what is still pending (for a few seconds at most), then stops.
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  int fd() const { return wake_read_.get(); }
  std::vector<Event> take_events();

  void report_failure(const std::string& what);
  void report_done();

  static std::string failed_key() { return "mcirun/failed"; }
  static std::string done_key(int node) { return "mcirun/done/" + std::to_string(node); }

 private:
  void run();
  void post(Event e);

  NodeLinkOptions opts_;
  Fd wake_read_, wake_write_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::string> failure_to_publish_;
  bool done_to_publish_ = false;
  std::vector<Event> events_;
  std::thread thread_;
};

}  // namespace mci::launch
