// Elastic membership (--nnodes MIN:MAX): before each attempt, the nodes
// that are there meet on node 0's store and node 0 says who is in, as
// torchrun's c10d rendezvous does, within mcirun's rule that node 0 (the
// store's host) is always in and always GROUP_RANK 0 (rank 0 of the program
// runs there, at the MASTER_PORT it holds). Keys (store/keys.hpp), beside
// heartbeat.hpp's:
//   mcirun/elastic/next_id        each other node's id, once (1, 2, ...)
//   mcirun/elastic/node/ID        that node's mcirun (records::NodeCard)
//   mcirun/elastic/open           the attempt whose round takes names now
//   mcirun/elastic/round/N/...    attempt N's round, a DecideOnce
//                                 (store/decide_once.hpp): each other node
//                                 arrives (records::NodeSlot, its id), node 0
//                                 decides: the records::NodeSlot list, in
//                                 GROUP_RANK order. A node outside the
//                                 decision (too late, or MAX reached) signs
//                                 up for the next round.
//   mcirun/elastic/closed         the job's exit code, when node 0 ends it:
//                                 nodes still waiting to join leave
// Node 0 closes a round when MAX nodes are in, or MIN are and: on the first
// start, last_call_timeout has passed since the MIN-th came (torchrun's
// rule); on a restart, every node of the attempt before is back or lost (no
// wait for nodes that may never come). A node that signs up while an
// attempt runs joins the next one: mcirun does not restart a healthy
// attempt to let it in (torchrun does).
//
// On etcd (JobStore::replicated) no node hosts the store and none is node
// 0 for good: every node takes an id (1, 2, ...), beats, and signs up, and
// any node of the attempt before (any node, for the first) may decide a
// round by the same rule; the first decision fixed wins (DecideOnce), so a
// lost node leads nothing. GROUP_RANK 0, where rank 0 runs, is the first
// node of the list: the first of the attempt before that is back, so rank 0
// moves only when its node is lost. A node that came late decides a
// restart only once every node of the attempt before is gone (only they
// know whether it still runs).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launch/attempt.hpp"
#include "launch/config/job_config.hpp"
#include "launch/nodes/heartbeat.hpp"
#include "launch/ranks/signals.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"

namespace mci {
class DecideOnce;
}

namespace mci::launch {

struct ElasticNode {
  int id = 0;  // 0: node 0
  int nproc = 1;
  std::string host;  // node 0 only knows these two
  pid_t pid = 0;
};

struct Membership {
  int attempt = 0;
  int group_rank = 0;
  std::vector<ElasticNode> nodes;  // in GROUP_RANK order, node 0 first

  int first_rank() const;
  int world_size() const;
};

struct JoinOutcome {
  std::optional<Membership> membership;  // this node is in the attempt
  int signal = 0;                        // mcirun was told to stop while waiting
  std::optional<int> job_ended;          // node 0 ended the job first: its exit code
};

class ElasticRendezvous {
 public:
  // Connects to node 0's store (hosted already, on node 0), or this node's
  // relay to etcd; a node that does not host the store takes its id and
  // starts beating. Throws Error when the store cannot
  // be reached within job.join_timeout.
  ElasticRendezvous(const JobConfig& job, const JobStore& store);
  ~ElasticRendezvous();
  ElasticRendezvous(const ElasticRendezvous&) = delete;
  ElasticRendezvous& operator=(const ElasticRendezvous&) = delete;

  // The attempt this node runs next, from `attempt` on (a node that came
  // late gets a later one). Node 0 throws TimeoutError when fewer than MIN
  // nodes are there within join_timeout; any node throws Error when the
  // store goes away.
  JoinOutcome join(int attempt, SignalFd& signals);
  // Node 0, when the job ends: nodes still waiting leave with rc.
  void close(int rc);
  // Whether this node watches the others while an attempt runs (node 0, or
  // every node on etcd), and which: every node of m but this one.
  bool watches() const { return hosts_store_ || peers_; }
  std::vector<WatchedNode> watched(const Membership& m) const;
  // A MemberWatch found node `id` lost; the next round does not wait for
  // its silence again.
  void mark_lost(int id, const std::string& why) { known_lost_[id] = why; }
  // Whether node `id` is lost, as `beats` sees it (gone_now, or silent).
  bool lost(BeatTracker& beats, int id, std::string* why) { return beats.lost(*store_, id, why); }

 private:
  // What a wait for a round's decision ended with: the decision, or the
  // signal or job end that came first.
  struct RoundEnd {
    std::optional<std::string> decision;
    int signal = 0;
    std::optional<int> job_ended;
    bool orphaned = false;  // a peer: every node of the attempt before is gone
  };
  JoinOutcome host_round(int attempt, SignalFd& signals);
  JoinOutcome member_round(int attempt, SignalFd& signals);
  JoinOutcome peer_round(int attempt, SignalFd& signals);
  // Waits until enough nodes signed up for `round`, then fixes its list
  // (unless another node fixed one first, for a peer). before: the nodes of
  // the attempt before (node 0 left out); restart: there was one (its
  // nodes are awaited, rather than last_call_timeout).
  RoundEnd lead(DecideOnce& round, int attempt, const std::vector<ElasticNode>& before, bool restart,
                SignalFd& signals);
  // Waits for another node's decision of `round`.
  RoundEnd follow(DecideOnce& round, SignalFd& signals);
  // A peer that may not decide: the same, but returns `orphaned` once every
  // node of the attempt before (read from the store when it is decided) is
  // gone, so that this node decides instead.
  RoundEnd follow_unless_orphaned(DecideOnce& round, int attempt, std::vector<ElasticNode>& before, SignalFd& signals);
  std::optional<int> job_closed();
  ElasticNode describe(int id);
  std::vector<ElasticNode> describe_all(const std::vector<ElasticNode>& ids);
  int awaited(int attempt, const std::vector<ElasticNode>& before, const std::vector<int>& in, BeatTracker& beats,
              std::set<int>& lost_said);
  TimeoutError too_few(int here, const std::vector<ElasticNode>& before, const std::set<int>& lost_said) const;
  std::vector<int> signed_up(DecideOnce& round);
  int open_round(int otherwise);
  void say_waiting(int round, int attempt, bool& said) const;

  const JobConfig& job_;
  ElasticNodes range_;
  bool hosts_store_ = false;
  bool peers_ = false;  // on etcd: no node hosts the store, any may decide
  StoreAddress address_;
  std::unique_ptr<TcpStore> store_;
  int id_ = 0;
  std::optional<Membership> last_;  // node 0, or a peer: the attempt before it ran
  std::map<int, std::string> known_lost_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// A line for the log: "attempt 1: 2 node(s) (--nnodes=1:2): ..."
std::string describe_membership(const Membership& m, const ElasticNodes& range);

}  // namespace mci::launch
