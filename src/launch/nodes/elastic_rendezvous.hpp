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
  // Connects to node 0's store (hosted already, on node 0); another node
  // takes its id and starts beating. Throws Error when the store cannot
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
  // Node 0: the other nodes of an attempt, for a MemberWatch.
  std::vector<WatchedNode> watched(const Membership& m) const;
  // Node 0: a MemberWatch found node `id` lost; the next round does not
  // wait for its silence again.
  void mark_lost(int id, const std::string& why) { known_lost_[id] = why; }

 private:
  JoinOutcome host_round(int attempt, SignalFd& signals);
  JoinOutcome member_round(int attempt, SignalFd& signals);
  ElasticNode describe(int id);
  int awaited(int attempt, const std::vector<ElasticNode>& before, const std::vector<int>& in, BeatTracker& beats,
              std::set<int>& lost_said);
  TimeoutError too_few(int here, const std::vector<ElasticNode>& before, const std::set<int>& lost_said) const;
  std::vector<int> signed_up(DecideOnce& round);
  int open_round(int otherwise);

  const JobConfig& job_;
  ElasticNodes range_;
  bool hosts_store_ = false;
  StoreAddress address_;
  std::unique_ptr<TcpStore> store_;
  int id_ = 0;
  std::optional<Membership> last_;  // node 0: the attempt before
  std::map<int, std::string> known_lost_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// A line for the log: "attempt 1: 2 node(s) (--nnodes=1:2): ..."
std::string describe_membership(const Membership& m, const ElasticNodes& range);

}  // namespace mci::launch
