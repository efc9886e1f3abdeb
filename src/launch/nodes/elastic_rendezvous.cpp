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
    : job_(job), range_(*job.elastic), hosts_store_(store.hosted_here), address_(store) {
  store_ = address_.connect(std::chrono::seconds(10), job.join_timeout);
  if (hosts_store_) {
    store_->set(kOpen, to_bytes("0"));
    return;
  }
  id_ = static_cast<int>(store_->add(kNextId, 1));
  store_->set(node_key(id_), to_bytes(records::encode_node_card({::getpid(), job.nproc_per_node, host_name()})));
  heartbeat_ = std::make_unique<Heartbeat>(address_, id_, range_.keep_alive);
}

ElasticRendezvous::~ElasticRendezvous() = default;

ElasticNode ElasticRendezvous::describe(int id) {
  if (id == 0) return {0, job_.nproc_per_node, host_name(), ::getpid()};
  const std::string v = to_string(store_->get(node_key(id), kCardLimit));
  try {
    const records::NodeCard c = records::decode_node_card(v, "the value");
    return {id, c.nproc, c.host, c.pid};
  } catch (const records::RecordError& e) {
    throw Error(fmt::format("mcirun: the job's store holds '{}' for node id {} ({}): is another job using this store?",
                            v, id, e.what()));
  }
}

std::vector<WatchedNode> ElasticRendezvous::watched(const Membership& m) const {
  std::vector<WatchedNode> out;
  for (std::size_t g = 1; g < m.nodes.size(); ++g) {
    const ElasticNode& n = m.nodes[g];
    out.push_back({static_cast<int>(g), n.id, n.host, n.pid});
  }
  return out;
}

JoinOutcome ElasticRendezvous::join(int attempt, SignalFd& signals) {
  return hosts_store_ ? host_round(attempt, signals) : member_round(attempt, signals);
}

void ElasticRendezvous::close(int rc) {
  try {
    store_->set(kClosedKey, to_bytes(std::to_string(rc)));
  } catch (const Error&) {
    // our own store: nothing else can fail it but its end
  }
}

// Node 0: how many nodes of the attempt before may still come back for
// `attempt` (neither signed up nor lost); says once of each that is lost.
int ElasticRendezvous::awaited(int attempt, const std::vector<ElasticNode>& before, const std::vector<int>& in,
                               BeatTracker& beats, std::set<int>& lost_said) {
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
                      &node - before.data() + 1, attempt - 1, node.host, node.pid, why, attempt, range_.min_nodes));
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

JoinOutcome ElasticRendezvous::host_round(int attempt, SignalFd& signals) {
  const Deadline dl(job_.join_timeout);
  DecideOnce round(*store_, round_terms(attempt));
  BeatTracker beats(range_.lost_after());
  std::vector<int> in;  // the other nodes' ids, in the order they signed up
  std::int64_t listed = 0;
  std::set<int> lost_said;
  std::optional<Clock::time_point> min_since;
  std::vector<ElasticNode> before;  // the other nodes of the attempt before
  if (last_) before.assign(last_->nodes.begin() + 1, last_->nodes.end());

  while (true) {
    // The list is read again only when the count says it grew.
    if (const std::int64_t n = round.count(); n != listed) {
      in = signed_up(round);
      listed = n;
    }
    const int left = awaited(attempt, before, in, beats, lost_said);
    const int here = 1 + static_cast<int>(in.size());
    if (here >= range_.min_nodes && !min_since) min_since = Clock::now();
    const bool first_start = !last_;
    const bool last_call_over = min_since && Clock::now() - *min_since >= range_.last_call;
    if (here >= range_.max_nodes || (here >= range_.min_nodes && (first_start ? last_call_over : left == 0))) break;
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
  // Node 0, then the nodes of the attempt before in their order, then the
  // newcomers in the order they came, up to MAX: a node keeps its place
  // relative to the others, so a restart moves as few ranks as it can.
  std::vector<int> order{0};
  for (const ElasticNode& n : before) {
    if (std::find(in.begin(), in.end(), n.id) != in.end()) order.push_back(n.id);
  }
  for (int id : in) {
    if (id > 0 && std::find(order.begin(), order.end(), id) == order.end()) order.push_back(id);
  }
  if (static_cast<int>(order.size()) > range_.max_nodes) order.resize(static_cast<std::size_t>(range_.max_nodes));
  Membership m;
  m.attempt = attempt;
  m.group_rank = 0;
  for (int id : order) m.nodes.push_back(describe(id));
  // Node 0 is the only one to decide: another decision is another job's.
  const std::string mine = members_text(m.nodes);
  if (const std::string fixed = round.decide(mine); fixed != mine) {
    throw Error(
        fmt::format("mcirun: the job's store already holds a list of the nodes of attempt {} ('{}', store key "
                    "'{}'), not written by this node 0: is another job using this store?",
                    attempt, fixed, round.decision_key()));
  }
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
    if (round > attempt && !said_waiting) {
      said_waiting = true;
      say(
          fmt::format("mcirun: the job has started without this node: waiting to join it at attempt {} (the next "
                      "start of the job, after a failure; --max-restarts={})",
                      round, job_.max_restarts));
    }
    std::optional<std::string> decision;
    while (!(decision = agreement.decision(std::chrono::milliseconds(0)))) {
      if (store_->check({kClosedKey})) {
        const int rc = static_cast<int>(parse_int(to_string(store_->get(kClosedKey))).value_or(1));
        return {std::nullopt, 0, rc};
      }
      if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
    }
    Membership m;
    m.attempt = round;
    m.nodes = parse_members(*decision);
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

int ElasticRendezvous::open_round(int otherwise) {
  return static_cast<int>(parse_int(to_string(store_->get(kOpen))).value_or(otherwise));
}

}  // namespace mci::launch
