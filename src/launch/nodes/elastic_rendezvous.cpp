#include "launch/nodes/elastic_rendezvous.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/duration_text.hpp"
#include "common/env.hpp"
#include "common/socket.hpp"
#include "launch/output/stream_relay.hpp"
#include "mci/errors.hpp"
#include "store/decide_once.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"
#include "store/records.hpp"

namespace mci::launch {

namespace {

// How often a waiting node looks again (and at its signals).
constexpr auto kSlice = std::chrono::milliseconds(100);
// A node's card is in the store before it signs up: node 0 waits this long
// for one it lacks (a store another program writes to) before it gives up.
constexpr auto kCardLimit = std::chrono::seconds(5);

using keys::elastic::kNextId;
using keys::elastic::kOpen;
constexpr const char* kClosedKey = keys::elastic::kClosed;
std::string node_key(int id) { return keys::elastic::node(id); }

// An attempt's round: node 0 decides, the other nodes sign up.
DecideOnce::Terms round_terms(int attempt) {
  return {keys::elastic::round(attempt), fmt::format("node 0's list of the nodes of attempt {}", attempt),
          "node 0 decides once enough nodes are there (--nnodes MIN:MAX, --rdzv_conf join_timeout and "
          "last_call_timeout)",
          [](const records::Record& r) {
            const auto slots = records::decode_node_slots(records::encode(r), "an arrival");
            return fmt::format("mcirun id {} ({} process(es))", slots.at(0).id, slots.at(0).nproc);
          }};
}

// A stop signal that arrived, or 0.
int stop_signal(SignalFd& signals, std::chrono::milliseconds wait) {
  pollfd p{signals.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return 0;
  for (int sig : signals.take()) {
    if (is_stop_signal(sig)) return sig;
  }
  return 0;
}

std::string members_text(const std::vector<ElasticNode>& nodes) {
  std::vector<records::NodeSlot> slots;
  for (const auto& n : nodes) slots.push_back({n.id, n.nproc});
  return records::encode_node_slots(slots);
}

std::vector<ElasticNode> parse_members(const std::string& text) {
  std::vector<ElasticNode> out;
  try {
    for (const auto& s : records::decode_node_slots(text, "the list")) out.push_back({s.id, s.nproc, {}, 0});
  } catch (const records::RecordError& e) {
    throw Error(fmt::format("mcirun: node 0 wrote a list of nodes this mcirun cannot read: '{}' ({})", text, e.what()));
  }
  return out;
}

std::string range_text(const ElasticNodes& r) { return fmt::format("--nnodes={}:{}", r.min_nodes, r.max_nodes); }

}  // namespace

int Membership::first_rank() const {
  int first = 0;
  for (int g = 0; g < group_rank; ++g) first += nodes[static_cast<std::size_t>(g)].nproc;
  return first;
}

int Membership::world_size() const {
  int n = 0;
  for (const auto& node : nodes) n += node.nproc;
  return n;
}

std::string describe_membership(const Membership& m, const ElasticNodes& range) {
  std::string who;
  for (std::size_t g = 0; g < m.nodes.size(); ++g) {
    const ElasticNode& n = m.nodes[g];
    who += fmt::format("{}node {}", g == 0 ? "" : ", ", g);
    if (!n.host.empty()) who += fmt::format(" ({}, mcirun pid {})", n.host, n.pid);
  }
  const int first = m.first_rank();
  const int last = first + m.nodes[static_cast<std::size_t>(m.group_rank)].nproc - 1;
  return fmt::format(
      "attempt {}: {} node(s) ({}): {}; this node is node {} (GROUP_RANK), ranks {} to {} of WORLD_SIZE {}", m.attempt,
      m.nodes.size(), range_text(range), who, m.group_rank, first, last, m.world_size());
}

ElasticRendezvous::ElasticRendezvous(const JobConfig& job, const JobStore& store)
    : job_(job),
      range_(*job.elastic),
      hosts_store_(store.hosted_here),
      peers_(store.replicated && !store.hosted_here),
      address_(store) {
  store_ = address_.connect(std::chrono::seconds(10), job.join_timeout);
  if (hosts_store_) {
    store_->set(kOpen, to_bytes("0"));
    return;
  }
  id_ = static_cast<int>(store_->add(kNextId, 1));
  store_->set(node_key(id_), to_bytes(records::encode_node_card({::getpid(), job.nproc_per_node, host_name()})));
  // This connection lives as long as this mcirun: its close says the node
  // is gone (BeatTracker), within a relay's lease on etcd.
  count_connection(*store_, keys::elastic::present(id_), keys::elastic::present_gone(id_));
  heartbeat_ = std::make_unique<Heartbeat>(address_, id_, range_.keep_alive);
}

ElasticRendezvous::~ElasticRendezvous() = default;

ElasticNode ElasticRendezvous::describe(int id) {
  if (id == 0 && hosts_store_) return {0, job_.nproc_per_node, host_name(), ::getpid()};
  const std::string v = to_string(store_->get(node_key(id), kCardLimit));
  try {
    const records::NodeCard c = records::decode_node_card(v, "the value");
    return {id, c.nproc, c.host, c.pid};
  } catch (const records::RecordError& e) {
    throw Error(fmt::format("mcirun: the job's store holds '{}' for node id {} ({}): is another job using this store?",
                            v, id, e.what()));
  }
}

std::vector<ElasticNode> ElasticRendezvous::describe_all(const std::vector<ElasticNode>& ids) {
  std::vector<ElasticNode> out;
  for (const ElasticNode& n : ids) out.push_back(describe(n.id));
  return out;
}

std::vector<WatchedNode> ElasticRendezvous::watched(const Membership& m) const {
  std::vector<WatchedNode> out;
  for (std::size_t g = 0; g < m.nodes.size(); ++g) {
    if (static_cast<int>(g) == m.group_rank) continue;
    const ElasticNode& n = m.nodes[g];
    out.push_back({static_cast<int>(g), n.id, n.host, n.pid});
  }
  return out;
}

JoinOutcome ElasticRendezvous::join(int attempt, SignalFd& signals) {
  if (hosts_store_) return host_round(attempt, signals);
  return peers_ ? peer_round(attempt, signals) : member_round(attempt, signals);
}

void ElasticRendezvous::close(int rc) {
  try {
    store_->set(kClosedKey, to_bytes(std::to_string(rc)));
  } catch (const Error&) {
    // our own store: nothing else can fail it but its end; on etcd, a
    // node still waiting takes the next round itself once every node of
    // the last attempt is gone (peer_round)
  }
}

std::optional<int> ElasticRendezvous::job_closed() {
  if (!store_->check({kClosedKey})) return std::nullopt;
  return static_cast<int>(parse_int(to_string(store_->get(kClosedKey))).value_or(1));
}

// How many nodes of the attempt before may still come back for `attempt`
// (neither signed up nor lost); says once of each that is lost.
int ElasticRendezvous::awaited(int attempt, const std::vector<ElasticNode>& before, const std::vector<int>& in,
                               BeatTracker& beats, std::set<int>& lost_said) {
  // Node 0 is not in `before`: the others' GROUP_RANK starts at 1.
  const long first_group = hosts_store_ ? 1 : 0;
  int n = 0;
  for (const ElasticNode& node : before) {
    if (std::find(in.begin(), in.end(), node.id) != in.end() || lost_said.count(node.id)) continue;
    std::string why;
    const auto known = known_lost_.find(node.id);
    if (known != known_lost_.end()) why = known->second;
    if (known != known_lost_.end() || beats.lost(*store_, node.id, &why)) {
      lost_said.insert(node.id);
      say(
          fmt::format("mcirun: node {} of attempt {} ({}, mcirun pid {}) is lost: {}; attempt {} goes on without it "
                      "if at least {} node(s) are there",
                      &node - before.data() + first_group, attempt - 1, node.host, node.pid, why, attempt,
                      range_.min_nodes));
      continue;
    }
    ++n;
  }
  return n;
}

TimeoutError ElasticRendezvous::too_few(int here, const std::vector<ElasticNode>& before,
                                        const std::set<int>& lost_said) const {
  std::string lost;
  for (const ElasticNode& n : before) {
    if (lost_said.count(n.id)) lost += fmt::format("{}{} (mcirun pid {})", lost.empty() ? "" : ", ", n.host, n.pid);
  }
  return TimeoutError(
      fmt::format("{} node(s) joined within {} (--rdzv_conf join_timeout), fewer than the {} that {} needs{}: start "
                  "more nodes with the same command line within join_timeout, or lower MIN",
                  here, seconds_text(job_.join_timeout), range_.min_nodes, range_text(range_),
                  lost.empty() ? "" : "; lost: " + lost));
}

ElasticRendezvous::RoundEnd ElasticRendezvous::lead(DecideOnce& round, int attempt,
                                                    const std::vector<ElasticNode>& before, bool restart,
                                                    SignalFd& signals) {
  const Deadline dl(job_.join_timeout);
  BeatTracker beats(range_.lost_after());
  std::vector<int> in;  // the nodes' ids that signed up, in the order they did (node 0 does not)
  std::int64_t listed = 0;
  std::set<int> lost_said;
  std::optional<Clock::time_point> min_since;
  const int self = hosts_store_ ? 1 : 0;

  while (true) {
    if (peers_) {  // another node may decide first
      if (auto d = round.decision(std::chrono::milliseconds(0))) return {std::move(d), 0, std::nullopt};
      if (const auto rc = job_closed()) return {std::nullopt, 0, rc};
    }
    // The list is read again only when the count says it grew.
    if (const std::int64_t n = round.count(); n != listed) {
      in = signed_up(round);
      listed = n;
    }
    const int left = awaited(attempt, before, in, beats, lost_said);
    const int here = self + static_cast<int>(in.size());
    if (here >= range_.min_nodes && !min_since) min_since = Clock::now();
    const bool last_call_over = min_since && Clock::now() - *min_since >= range_.last_call;
    if (here >= range_.max_nodes || (here >= range_.min_nodes && (restart ? left == 0 : last_call_over))) break;
    if (dl.expired()) {
      if (here >= range_.min_nodes) break;  // the ones still awaited are left out
      throw too_few(here, before, lost_said);
    }
    if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
  }

  // The next round opens before this one is decided: a node that signs up
  // from now on signs up there, and one that came in between finds itself
  // outside this decision and goes there too.
  store_->set(kOpen, to_bytes(std::to_string(attempt + 1)));
  in = signed_up(round);
  // A node that signed up and is gone already (its mcirun ended or was
  // killed: its connection closed) would become a member that never
  // starts; at the first start nothing else has looked at it.
  std::erase_if(in, [&](int id) { return id != id_ && gone_now(*store_, id); });
  // Node 0, then the nodes of the attempt before in their order, then the
  // newcomers in the order they came, up to MAX: a node keeps its place
  // relative to the others, so a restart moves as few ranks as it can (and
  // rank 0 only when its node is lost).
  std::vector<int> order;
  if (hosts_store_) order.push_back(0);
  for (const ElasticNode& n : before) {
    if (std::find(in.begin(), in.end(), n.id) != in.end()) order.push_back(n.id);
  }
  for (int id : in) {
    if (std::find(order.begin(), order.end(), id) == order.end()) order.push_back(id);
  }
  if (static_cast<int>(order.size()) > range_.max_nodes) order.resize(static_cast<std::size_t>(range_.max_nodes));
  std::vector<ElasticNode> nodes;
  for (int id : order) nodes.push_back(describe(id));
  const std::string mine = members_text(nodes);
  const std::string fixed = round.decide(mine);
  // Node 0 is the only one to decide: another decision is another job's.
  // Peers may race; the first fixed holds for all of them.
  if (fixed != mine && !peers_) {
    throw Error(
        fmt::format("mcirun: the job's store already holds a list of the nodes of attempt {} ('{}', store key "
                    "'{}'), not written by this node 0: is another job using this store?",
                    attempt, fixed, round.decision_key()));
  }
  return {fixed, 0, std::nullopt};
}

ElasticRendezvous::RoundEnd ElasticRendezvous::follow_unless_orphaned(DecideOnce& round, int attempt,
                                                                      std::vector<ElasticNode>& before,
                                                                      SignalFd& signals) {
  BeatTracker beats(range_.lost_after());
  while (true) {
    if (auto d = round.decision(std::chrono::milliseconds(0))) return {std::move(d), 0, std::nullopt};
    if (const auto rc = job_closed()) return {std::nullopt, 0, rc};
    // The attempt before may have been decided since this node came.
    if (before.empty() && attempt > 0) {
      DecideOnce previous(*store_, round_terms(attempt - 1));
      if (const auto d = previous.decision(std::chrono::milliseconds(0))) before = describe_all(parse_members(*d));
    }
    std::map<int, std::string> why;
    if (!before.empty() && std::all_of(before.begin(), before.end(), [&](const ElasticNode& n) {
          return known_lost_.count(n.id) || beats.lost(*store_, n.id, &why[n.id]);
        })) {
      known_lost_.insert(why.begin(), why.end());  // the round this node leads need not wait for them again
      say(
          fmt::format("mcirun: every node of attempt {} is gone (stopped or lost) and none started attempt {}: this "
                      "node starts it with the nodes that are here",
                      attempt - 1, attempt));
      RoundEnd orphaned;
      orphaned.orphaned = true;
      return orphaned;
    }
    if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
  }
}

ElasticRendezvous::RoundEnd ElasticRendezvous::follow(DecideOnce& round, SignalFd& signals) {
  while (true) {
    if (auto d = round.decision(std::chrono::milliseconds(0))) return {std::move(d), 0, std::nullopt};
    if (const auto rc = job_closed()) return {std::nullopt, 0, rc};
    if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
  }
}

JoinOutcome ElasticRendezvous::host_round(int attempt, SignalFd& signals) {
  DecideOnce round(*store_, round_terms(attempt));
  std::vector<ElasticNode> before;  // the other nodes of the attempt before
  if (last_) before.assign(last_->nodes.begin() + 1, last_->nodes.end());
  const RoundEnd end = lead(round, attempt, before, last_.has_value(), signals);
  if (!end.decision) return {std::nullopt, end.signal, end.job_ended};
  Membership m;
  m.attempt = attempt;
  m.group_rank = 0;
  m.nodes = describe_all(parse_members(*end.decision));
  last_ = m;
  return {m, 0, std::nullopt};
}

std::vector<int> ElasticRendezvous::signed_up(DecideOnce& round) {
  std::vector<int> ids;
  for (const auto& s : records::decode_node_slots(round.arrivals(), "store key '" + round.arrived_key() + "'")) {
    if (std::find(ids.begin(), ids.end(), s.id) == ids.end()) ids.push_back(s.id);
  }
  return ids;
}

void ElasticRendezvous::say_waiting(int round, int attempt, bool& said) const {
  if (round <= attempt || said) return;
  said = true;
  say(
      fmt::format("mcirun: the job has started without this node: waiting to join it at attempt {} (the next "
                  "start of the job, after a failure; --max-restarts={})",
                  round, job_.max_restarts));
}

JoinOutcome ElasticRendezvous::member_round(int attempt, SignalFd& signals) {
  // A node that comes late learns the attempt that takes names now.
  int round = attempt;
  if (attempt == 0) {
    while (!store_->check({kOpen})) {
      if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
    }
    round = std::max(round, open_round(round));
  }
  bool said_waiting = false;
  while (true) {
    DecideOnce agreement(*store_, round_terms(round));
    agreement.arrive(records::encode_node_slots({{id_, job_.nproc_per_node}}));
    say_waiting(round, attempt, said_waiting);
    const RoundEnd end = follow(agreement, signals);
    if (!end.decision) return {std::nullopt, end.signal, end.job_ended};
    Membership m;
    m.attempt = round;
    m.nodes = parse_members(*end.decision);
    const auto me = std::find_if(m.nodes.begin(), m.nodes.end(), [&](const ElasticNode& n) { return n.id == id_; });
    if (me != m.nodes.end()) {
      m.group_rank = static_cast<int>(me - m.nodes.begin());
      return {m, 0, std::nullopt};
    }
    // Left out: the round was full, or this node signed up after node 0
    // had read the list (it opened the next round first).
    if (static_cast<int>(m.nodes.size()) >= range_.max_nodes) {
      say(fmt::format("mcirun: attempt {} already has the {} nodes --nnodes={}:{} allows: this node waits for the next",
                      round, range_.max_nodes, range_.min_nodes, range_.max_nodes));
    }
    round = std::max(round + 1, open_round(round + 1));
  }
}

// On etcd: every node signs up, and a node of the attempt before (any node,
// for the first start) decides; the others wait for that decision.
JoinOutcome ElasticRendezvous::peer_round(int attempt, SignalFd& signals) {
  // A node that comes late (or restarts after the others) learns the
  // attempt that takes names now.
  int round = attempt;
  if (store_->check({kOpen})) round = std::max(round, open_round(round));
  bool said_waiting = false;
  while (true) {
    DecideOnce agreement(*store_, round_terms(round));
    agreement.arrive(records::encode_node_slots({{id_, job_.nproc_per_node}}));
    say_waiting(round, attempt, said_waiting);
    // Who may decide a restart: the nodes that ran the attempt before (a
    // node that came late cannot tell whether it still runs).
    std::vector<ElasticNode> before;
    bool may_lead = round == 0;
    if (round > 0) {
      DecideOnce previous(*store_, round_terms(round - 1));
      if (const auto d = previous.decision(std::chrono::milliseconds(0))) {
        before = describe_all(parse_members(*d));
        may_lead = std::any_of(before.begin(), before.end(), [&](const ElasticNode& n) { return n.id == id_; });
      }
    }
    RoundEnd end;
    if (may_lead) {
      end = lead(agreement, round, before, round > 0, signals);
    } else {
      // A node that waits leads after all if every node of the attempt
      // before is gone (all stopped or lost): the job goes on with the
      // nodes that are left, rather than wait for a decision nobody makes.
      end = follow_unless_orphaned(agreement, round, before, signals);
      if (end.orphaned) end = lead(agreement, round, before, true, signals);
    }
    if (!end.decision) return {std::nullopt, end.signal, end.job_ended};
    Membership m;
    m.attempt = round;
    m.nodes = describe_all(parse_members(*end.decision));
    const auto me = std::find_if(m.nodes.begin(), m.nodes.end(), [&](const ElasticNode& n) { return n.id == id_; });
    if (me != m.nodes.end()) {
      m.group_rank = static_cast<int>(me - m.nodes.begin());
      last_ = m;
      return {m, 0, std::nullopt};
    }
    if (static_cast<int>(m.nodes.size()) >= range_.max_nodes) {
      say(fmt::format("mcirun: attempt {} already has the {} nodes --nnodes={}:{} allows: this node waits for the next",
                      round, range_.max_nodes, range_.min_nodes, range_.max_nodes));
    }
    round = std::max(round + 1, open_round(round + 1));
  }
}

int ElasticRendezvous::open_round(int otherwise) {
  return static_cast<int>(parse_int(to_string(store_->get(kOpen))).value_or(otherwise));
}

}  // namespace mci::launch
