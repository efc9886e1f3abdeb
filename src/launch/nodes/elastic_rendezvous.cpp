#include "launch/nodes/elastic_rendezvous.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/env.hpp"
#include "common/socket.hpp"
#include "launch/output/stream_relay.hpp"
#include "mci/errors.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"

namespace mci::launch {

namespace {

// Added to a round's count to close it: far above any number of nodes.
constexpr std::int64_t kClosed = std::int64_t{1} << 40;
// How often a waiting node looks again (and at its signals).
constexpr auto kSlice = std::chrono::milliseconds(100);
// A node that took a place publishes its id right after: node 0 waits this
// long for it before leaving that place empty (its mcirun died between).
constexpr auto kSlotLimit = std::chrono::seconds(5);

using keys::elastic::kNextId;
using keys::elastic::kOpen;
constexpr const char* kClosedKey = keys::elastic::kClosed;
std::string node_key(int id) { return keys::elastic::node(id); }
std::string round_key(int attempt, const std::string& name) { return keys::elastic::round(attempt, name); }

std::string seconds_text(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? fmt::format("{} s", ms.count() / 1000)
                                : fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000);
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
  const std::string v = to_string(store_->get(node_key(id), kSlotLimit));
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

JoinOutcome ElasticRendezvous::host_round(int attempt, SignalFd& signals) {
  const Deadline dl(job_.join_timeout);
  const std::string count_key = round_key(attempt, "count");
  BeatTracker beats(range_.lost_after());
  std::vector<int> signed_up;  // ids, in the order of their places
  std::set<int> lost_said;
  std::optional<Clock::time_point> min_since;
  std::vector<ElasticNode> before;  // the other nodes of the attempt before
  if (last_) before.assign(last_->nodes.begin() + 1, last_->nodes.end());

  auto read_places = [&](std::int64_t places) {
    while (static_cast<std::int64_t>(signed_up.size()) < places) {
      const std::string slot = round_key(attempt, "slot/" + std::to_string(signed_up.size() + 1));
      if (!store_->check({slot})) return;
      signed_up.push_back(static_cast<int>(parse_int(to_string(store_->get(slot))).value_or(-1)));
    }
  };
  auto is_in = [&](int id) { return std::find(signed_up.begin(), signed_up.end(), id) != signed_up.end(); };

  while (true) {
    read_places(store_->add(count_key, 0));
    // The nodes of the attempt before that may still come back.
    int awaited = 0;
    for (const ElasticNode& n : before) {
      if (is_in(n.id) || lost_said.count(n.id)) continue;
      std::string why;
      const auto known = known_lost_.find(n.id);
      if (known != known_lost_.end()) why = known->second;
      if (known != known_lost_.end() || beats.lost(*store_, n.id, &why)) {
        lost_said.insert(n.id);
        say(
            fmt::format("mcirun: node {} of attempt {} ({}, mcirun pid {}) is lost: {}; attempt {} goes on without it "
                        "if at least {} node(s) are there",
                        &n - before.data() + 1, attempt - 1, n.host, n.pid, why, attempt, range_.min_nodes));
        continue;
      }
      ++awaited;
    }
    const int here = 1 + static_cast<int>(signed_up.size());
    if (here >= range_.min_nodes && !min_since) min_since = Clock::now();
    const bool full = here >= range_.max_nodes;
    const bool first_start = !last_;
    const bool last_call_over = min_since && Clock::now() - *min_since >= range_.last_call;
    if (full || (here >= range_.min_nodes && (first_start ? last_call_over : awaited == 0))) break;
    if (dl.expired()) {
      if (here >= range_.min_nodes) break;  // the ones still awaited are left out
      std::string lost;
      for (const ElasticNode& n : before) {
        if (lost_said.count(n.id)) lost += fmt::format("{}{} (mcirun pid {})", lost.empty() ? "" : ", ", n.host, n.pid);
      }
      throw TimeoutError(fmt::format(
          "{} node(s) joined within {} (--rdzv_conf join_timeout), fewer than the {} that {} needs{}: start "
          "more nodes with the same command line within join_timeout, or lower MIN",
          here, seconds_text(job_.join_timeout), range_.min_nodes, range_text(range_),
          lost.empty() ? "" : "; lost: " + lost));
    }
    if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
  }

  // Close the round: whoever signs up from now on is for the next attempt.
  const std::int64_t places = store_->add(count_key, kClosed) - kClosed;
  const Deadline slot_dl(kSlotLimit);
  int late_signal = 0;  // kept for after the round is settled: the nodes in it must hear of the end
  while (static_cast<std::int64_t>(signed_up.size()) < places && !slot_dl.expired()) {
    read_places(places);
    if (static_cast<std::int64_t>(signed_up.size()) < places) {
      const int sig = stop_signal(signals, std::chrono::milliseconds(10));
      if (late_signal == 0) late_signal = sig;
    }
  }
  // Node 0, then the nodes of the attempt before in their order, then the
  // newcomers in the order they came, up to MAX: a node keeps its place
  // relative to the others, so a restart moves as few ranks as it can.
  std::vector<int> order{0};
  for (const ElasticNode& n : before) {
    if (is_in(n.id)) order.push_back(n.id);
  }
  for (int id : signed_up) {
    if (id > 0 && std::find(order.begin(), order.end(), id) == order.end()) order.push_back(id);
  }
  if (static_cast<int>(order.size()) > range_.max_nodes) order.resize(static_cast<std::size_t>(range_.max_nodes));
  Membership m;
  m.attempt = attempt;
  m.group_rank = 0;
  for (int id : order) m.nodes.push_back(describe(id));
  store_->set(kOpen, to_bytes(std::to_string(attempt + 1)));
  store_->set(round_key(attempt, "members"), to_bytes(members_text(m.nodes)));
  last_ = m;
  if (late_signal != 0) return {std::nullopt, late_signal, std::nullopt};
  return {m, 0, std::nullopt};
}

JoinOutcome ElasticRendezvous::member_round(int attempt, SignalFd& signals) {
  // A node that comes late learns the attempt that takes names now.
  int round = attempt;
  if (attempt == 0) {
    while (!store_->check({kOpen})) {
      if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
    }
    round = std::max(round, static_cast<int>(parse_int(to_string(store_->get(kOpen))).value_or(0)));
  }
  bool said_waiting = false;
  while (true) {
    const std::int64_t place = store_->add(round_key(round, "count"), 1);
    if (place > kClosed) {
      // Too late for this round: the next one.
      round = static_cast<int>(parse_int(to_string(store_->get(kOpen))).value_or(round + 1));
      continue;
    }
    store_->set(round_key(round, "slot/" + std::to_string(place)), to_bytes(std::to_string(id_)));
    if (round > attempt && !said_waiting) {
      said_waiting = true;
      say(
          fmt::format("mcirun: the job has started without this node: waiting to join it at attempt {} (the next "
                      "start of the job, after a failure; --max-restarts={})",
                      round, job_.max_restarts));
    }
    const std::string members = round_key(round, "members");
    while (true) {
      if (store_->check({members})) break;
      if (store_->check({kClosedKey})) {
        const int rc = static_cast<int>(parse_int(to_string(store_->get(kClosedKey))).value_or(1));
        return {std::nullopt, 0, rc};
      }
      if (const int sig = stop_signal(signals, kSlice)) return {std::nullopt, sig, std::nullopt};
    }
    Membership m;
    m.attempt = round;
    m.nodes = parse_members(to_string(store_->get(members)));
    const auto me = std::find_if(m.nodes.begin(), m.nodes.end(), [&](const ElasticNode& n) { return n.id == id_; });
    if (me != m.nodes.end()) {
      m.group_rank = static_cast<int>(me - m.nodes.begin());
      return {m, 0, std::nullopt};
    }
    say(fmt::format("mcirun: attempt {} already has the {} nodes --nnodes={}:{} allows: this node waits for the next",
                    round, range_.max_nodes, range_.min_nodes, range_.max_nodes));
    ++round;
  }
}

}  // namespace mci::launch
