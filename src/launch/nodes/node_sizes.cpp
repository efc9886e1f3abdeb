#include "launch/nodes/node_sizes.hpp"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "mci/errors.hpp"
#include "store/decide_once.hpp"
#include "store/records.hpp"

namespace mci::launch {

namespace {

// Each store call's own wait, so that the loop looks at its signals and
// its deadline between tries.
constexpr auto kSizesTry = std::chrono::milliseconds(200);
constexpr const char* kReadKey = "mcirun/nodes/read";

std::vector<records::NodeSlot> slots_of(const std::string& arrivals) {
  std::vector<records::NodeSlot> out;
  for (const records::Record& r : records::decode_list(arrivals, "store key 'mcirun/nodes/arrived'")) {
    const auto one = records::decode_node_slots(records::encode(r), "a node's arrival at mcirun/nodes");
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

bool stop_requested(SignalFd& signals, int* stop_signal) {
  pollfd p{signals.fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  for (int sig : signals.take()) {
    if (is_stop_signal(sig)) {
      *stop_signal = sig;
      return true;
    }
  }
  return false;
}

}  // namespace

int NodeSizes::first_rank(int node_rank) const { return std::accumulate(nproc.begin(), nproc.begin() + node_rank, 0); }

int NodeSizes::world() const { return std::accumulate(nproc.begin(), nproc.end(), 0); }

std::optional<NodeSizes> agree_node_sizes(const NodeSizesOptions& o, SignalFd& signals, int* stop_signal,
                                          std::string* news) {
  const Deadline dl(o.wait_limit);
  std::unique_ptr<TcpStore> store;
  std::optional<DecideOnce> meeting;
  bool arrived = false;
  auto who = [](const records::Record& r) {
    const auto s = records::decode_node_slots(records::encode(r), "a node's arrival");
    return s.empty() ? std::string("?") : fmt::format("node {}", s.front().id);
  };
  while (true) {
    try {
      if (!store) {
        store = o.store.connect(kSizesTry, kSizesTry);
        meeting.emplace(*store, DecideOnce::Terms{kNodeSizesBase,
                                                  fmt::format("the process counts of the job's {} nodes", o.nnodes),
                                                  "start mcirun on every node", who});
      }
      if (!arrived) {
        if (o.node_rank != 0)
          store->set(fmt::format("{}/addr/{}", kNodeSizesBase, o.node_rank), to_bytes(store->local_address()));
        meeting->arrive(records::encode_node_slots({{o.node_rank, o.nproc}}));
        arrived = true;
      }
      std::optional<std::string> fixed = meeting->decision(kSizesTry);
      if (!fixed && meeting->count() >= o.nnodes) {
        std::vector<records::NodeSlot> slots = slots_of(meeting->arrivals());
        std::sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
        fixed = meeting->decide(records::encode_node_slots(slots));
      }
      if (fixed) {
        const auto slots = records::decode_node_slots(*fixed, "store key 'mcirun/nodes/decision'");
        store->add(kReadKey, 1);
        NodeSizes sizes;
        for (int id = 0; id < o.nnodes; ++id) {
          const auto n = std::count_if(slots.begin(), slots.end(), [&](const auto& s) { return s.id == id; });
          if (n != 1) {
            // The store's host keeps it up until every launcher has read
            // the list (a few seconds at most): each must say why it stops.
            const Deadline grace(std::chrono::seconds(5));
            while (o.hosts_store && store->add(kReadKey, 0) < static_cast<std::int64_t>(slots.size()) &&
                   !grace.expired()) {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            throw Error(
                fmt::format("{} launchers of this job said --node_rank={} (of --nnodes={}): give each node its own "
                            "--node_rank, 0 to {}",
                            n, id, o.nnodes, o.nnodes - 1));
          }
          sizes.nproc.push_back(
              std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.id == id; })->nproc);
        }
        // Set before node 1 arrived, so before any decision.
        const std::string addr_key = fmt::format("{}/addr/1", kNodeSizesBase);
        if (o.node_rank == 0 && store->check({addr_key}))
          sizes.other_node_addr = to_string(store->get(addr_key, kSizesTry));
        return sizes;
      }
      if (!o.news_key.empty() && store->check({o.news_key})) {
        *news = to_string(store->get(o.news_key, kSizesTry));
        return std::nullopt;
      }
    } catch (const TimeoutError&) {
      // node 0's launcher is not up yet, or the store is slow: try again
      if (!meeting) store.reset();
    }
    if (stop_requested(signals, stop_signal)) return std::nullopt;
    if (dl.expired()) {
      std::vector<std::string> expected;
      for (int id = 0; id < o.nnodes; ++id) expected.push_back(fmt::format("node {}", id));
      if (!meeting) {
        throw TimeoutError(fmt::format(
            "node 0's launcher at {}:{} did not answer within {} s: start mcirun with --node_rank=0 there, with "
            "the same --master_addr/--master_port (and MCI_JOB_TOKEN) on every node (--rdzv_conf "
            "join_timeout=SECONDS waits longer)",
            o.store.host, o.store.port, std::chrono::duration_cast<std::chrono::seconds>(o.wait_limit).count()));
      }
      throw meeting->timed_out(dl, expected);
    }
  }
}

}  // namespace mci::launch
