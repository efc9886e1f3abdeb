// How the launchers of a multi-node job learn about each other through the
// job's store on node 0, so one node's failure (or Ctrl-C) stops every node:
//   mcirun/failed      the news (records::NodeNews): the node, and what
//                      happened when a node's process failed, or signal N
//                      and where when a node's mcirun was told to stop by
//                      signal N; set once, by the first node with
//                      news (compare_set: the first report wins); every other
//                      launcher waits on it and stops its own processes (with
//                      that same signal, for a stop).
//   mcirun/seen/NODE   set by every node other than 0 once it read
//                      mcirun/failed: node 0 keeps the store up (a few
//                      seconds at most) until they all did, so a stop that
//                      node 0 itself reports is not lost when it exits.
//   mcirun/done/NODE   set when all of a node's processes exited 0; node 0
//                      keeps the store up until every node has said so (or
//                      failed, or is gone), like torchrun's exit barrier.
//   mcirun/beat/NODE   every node but 0 adds 1 once a second: node 0 stops
//                      waiting for a node silent for longer than
//                      MCI_NODE_SILENCE_MS (a cut link closes nothing).
//   mcirun/conns/NODE  counts a node's connections to the store, and
//   mcirun/gone/NODE   gets a byte from the store itself when one of them
//                      closes (append_on_close): a node whose every
//                      connection closed before it said "done" is gone (its
//                      mcirun killed, its host lost), and node 0 does not
//                      wait for it (--on-rank-loss=continue lets the others
//                      finish without it).
// Under --max-restarts, attempt N > 0 has keys of its own (mcirun/attempt/N/
// failed, ...), so an attempt's news never reads as the next one's, and
// join_attempt holds every node until all have stopped attempt N-1.
// The store calls block, so they run on a thread of their own; the event
// loop learns of news through fd(), a pipe it polls with everything else.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/socket.hpp"
#include "launch/ranks/signals.hpp"
#include "mci/store.hpp"

namespace mci {
class TcpStore;
}

namespace mci::launch {

struct NodeLinkOptions {
  StoreAddress store;  // node 0's
  int nnodes = 1;
  int node_rank = 0;
  int attempt = 0;                       // --max-restarts: which start of the job this is
  std::chrono::milliseconds slice{100};  // longest a store call holds the thread
  // Node 0, waiting for the others at the end: a node whose heartbeat
  // (mcirun/beat/NODE, once a second) has not moved for this long is gone
  // (its host lost, its link cut); MCI_NODE_SILENCE_MS.
  std::chrono::milliseconds silence_limit{std::chrono::seconds(10)};
};

// The store key `name` of attempt `attempt`: mcirun/NAME for the first,
// mcirun/attempt/N/NAME after.
std::string attempt_key(int attempt, const std::string& name);

// Before attempt o.attempt (> 0) starts on any node, every node has
// stopped its processes of the attempt before: a new rank 0 must not meet
// an old rank's store. Each node counts itself in
// (mcirun/attempt/N/joined); the last sets mcirun/attempt/N/go, which all
// wait for. nullopt once all are in; the signal when mcirun is told to stop
// meanwhile; TimeoutError (naming the nodes missing) after `limit`.
// A node found gone (store/node_presence.hpp) fails it at once with an Error naming
// the node: a job of fixed --nnodes cannot restart without it.
std::optional<int> join_attempt(const NodeLinkOptions& o, std::chrono::milliseconds limit, SignalFd& signals);

class NodeLink {
 public:
  enum class EventKind {
    peer_failed,   // another node's process failed (text: what it reported)
    peer_stopped,  // another node's mcirun got a stop signal (signal; text: "node N (host H)")
    all_done,      // node 0: every node's processes exited 0, or is gone
    peer_gone,     // node 0, waiting for the others: a node's mcirun is gone before it was done (text: "node N")
    store_lost,    // the store went away after we reached it: node 0's launcher is gone
    unreachable,   // the store could not be used at all (bad address or token)
  };
  struct Event {
    EventKind kind;
    std::string text;
    int signal = 0;  // peer_stopped: the signal that node's mcirun received
  };

  explicit NodeLink(NodeLinkOptions opts);
  // Publishes what is still pending (for a few seconds at most), then stops.
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  int fd() const { return wake_read_.get(); }
  std::vector<Event> take_events();

  void report_failure(const std::string& what);
  // This node's mcirun received sig (SIGINT, SIGTERM, SIGHUP); where: "host H".
  void report_stop(int sig, const std::string& where);
  void report_done();

  std::string failed_key() const { return key("failed"); }
  std::string done_key(int node) const { return key("done/" + std::to_string(node)); }
  std::string seen_key(int node) const { return key("seen/" + std::to_string(node)); }
  std::string conns_key(int node) const { return key("conns/" + std::to_string(node)); }
  std::string gone_key(int node) const { return key("gone/" + std::to_string(node)); }

  // Node 0, waiting for the others: how many have neither said "done" nor
  // gone (-1 until it has looked).
  int nodes_running() const { return nodes_running_.load(); }

  // What a value of failed_key() means to node `self` (nullopt: its own news).
  static std::optional<Event> parse_news(const std::string& value, int self);

 private:
  // What the thread keeps between the rounds of run().
  struct Loop {
    std::unique_ptr<TcpStore> store;
    std::optional<std::chrono::steady_clock::time_point> give_up;  // asked to stop: publish until then
    bool failure_seen = false;                                     // the news in the store was read
    bool all_done_posted = false;
    bool done_published = false;
    // Node 0: the store holds news (a failure or a stop) the other nodes
    // must read before it closes.
    bool news_in_store = false;
    bool others_heard_news = false;
    std::vector<bool> finished;  // node 0: by node, done or gone
    // Node 0: each node's last heartbeat value and when it was seen to move.
    std::vector<std::pair<std::int64_t, std::chrono::steady_clock::time_point>> beats;
    std::chrono::steady_clock::time_point next_beat{};  // the others: when to beat next
    // Taken from the reporters this round, not yet in the store.
    std::optional<std::string> failure;
    bool done = false;
  };

  std::string key(const std::string& name) const;
  void run();
  // A connection to the store, armed and counted (node_rank > 0): see
  // mcirun/conns above. Throws when the store cannot be reached.
  std::unique_ptr<TcpStore> connect_counted();
  // false: stop now (asked to, and nothing left to say or no time left).
  bool take_reports(Loop& s);
  void publish(Loop& s);
  // Node 0 with news in the store that some other node has not read yet.
  bool lingering(const Loop& s) const;
  // Node 0, stopping with news in the store: waits a slice for the other
  // nodes to read it; true when it did (the round ends there).
  bool linger_for_others(Loop& s);
  void watch(Loop& s);
  void put_back(Loop& s);
  // The store failed: tells the event loop, unless it is stopping anyway.
  void report_lost(bool reached, const std::string& what);
  void post(Event e);
  // Node 0, stopping: every other node read the news or is done already.
  bool others_heard(TcpStore& store);
  // Node 0, waiting for the others: looks at each that is not finished
  // yet; posts peer_gone for each newly gone. The number still running.
  int look_at_nodes(Loop& s);

  NodeLinkOptions opts_;
  Fd wake_read_, wake_write_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::string> failure_to_publish_;
  bool done_to_publish_ = false;
  std::vector<Event> events_;
  std::atomic<int> nodes_running_{-1};
  // The first connection, made before the node's processes start (run()
  // takes it): a node killed right after starting them reads as gone.
  std::unique_ptr<TcpStore> first_;
  std::thread thread_;
};

}  // namespace mci::launch
