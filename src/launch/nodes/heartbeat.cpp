#include "launch/nodes/heartbeat.hpp"

#include <fmt/format.h>

#include "common/duration_text.hpp"
#include "launch/nodes/node_link.hpp"
#include "mci/errors.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"
#include "store/records.hpp"

namespace mci::launch {

std::string beat_key(int id) { return keys::elastic::beat(id); }
std::string left_key(int id) { return keys::elastic::left(id); }

// A beat must never wait longer than the beats' own period for a lost node
// 0: the main thread finds out about that, and says so.
Heartbeat::Heartbeat(const StoreAddress& store, int id, std::chrono::milliseconds interval)
    : store_(store.options(interval, interval)), id_(id), interval_(interval) {
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeat::run() {
  std::unique_ptr<TcpStore> store;
  std::unique_lock lk(mu_);
  while (!stop_) {
    lk.unlock();
    try {
      if (!store) store = std::make_unique<TcpStore>(store_);
      store->add(beat_key(id_), 1);
    } catch (const Error&) {
      store.reset();  // node 0 unreachable this time: the next beat tries again
    }
    lk.lock();
    cv_.wait_for(lk, interval_, [this] { return stop_; });
  }
  lk.unlock();
  try {
    if (!store) store = std::make_unique<TcpStore>(store_);
    store->set(left_key(id_), to_bytes("1"));
  } catch (const Error&) {
    // node 0 is gone: nobody is left to tell
  }
}

bool gone_now(Store& store, int id, std::string* why) {
  if (store.check({left_key(id)})) {
    if (why) *why = "its mcirun left the job";
    return true;
  }
  if (all_closed(store, keys::elastic::present(id), keys::elastic::present_gone(id))) {
    if (why) *why = "its mcirun is gone (its store connection closed: killed, or its host lost)";
    return true;
  }
  return false;
}

bool BeatTracker::lost(Store& store, int id, std::string* why) {
  if (gone_now(store, id, why)) return true;
  const std::int64_t count = store.add(beat_key(id), 0);
  const auto now = Clock::now();
  auto [it, fresh] = seen_.try_emplace(id, Seen{count, now});
  if (!fresh && it->second.count != count) it->second = Seen{count, now};
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.since);
  if (silent < lost_after_) return false;
  if (why) *why = fmt::format("its mcirun sent no heartbeat for {}", seconds_text(silent));
  return true;
}

MemberWatch::MemberWatch(const StoreAddress& store, int attempt, std::vector<WatchedNode> nodes,
                         std::chrono::milliseconds lost_after, std::chrono::milliseconds period)
    : store_(store.options(std::chrono::seconds(2), period)),
      attempt_(attempt),
      nodes_(std::move(nodes)),
      lost_after_(lost_after),
      period_(period) {
  thread_ = std::thread([this] { run(); });
}

MemberWatch::~MemberWatch() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool MemberWatch::look(TcpStore& store, BeatTracker& beats) {
  const std::string failed = attempt_key(attempt_, "failed");
  if (store.check({failed})) return true;
  for (const WatchedNode& n : nodes_) {
    if (store.check({attempt_key(attempt_, "done/" + std::to_string(n.group_rank))})) continue;
    std::string why;
    if (!beats.lost(store, n.id, &why)) continue;
    // As a report of node n itself (node_link.hpp's news), so that every
    // node, node 0 included, reads it as another node's failure.
    store.compare_set(failed, {},
                      to_bytes(records::encode_node_news(
                          {n.group_rank, 0, fmt::format("lost: {} (mcirun pid {} on {})", why, n.pid, n.host)})));
    std::lock_guard lk(mu_);
    lost_.emplace(n.id, why);
    return true;
  }
  return false;
}

std::optional<std::pair<int, std::string>> MemberWatch::lost_node() const {
  std::lock_guard lk(mu_);
  return lost_;
}

void MemberWatch::run() {
  std::unique_ptr<TcpStore> store;
  BeatTracker beats(lost_after_);
  std::unique_lock lk(mu_);
  while (!stop_) {
    lk.unlock();
    bool finished = false;
    try {
      if (!store) store = std::make_unique<TcpStore>(store_);
      finished = look(*store, beats);
    } catch (const Error&) {
      store.reset();  // our own store, in this process: only its shutdown ends up here
    }
    lk.lock();
    if (finished) return;
    cv_.wait_for(lk, period_, [this] { return stop_; });
  }
}

}  // namespace mci::launch
