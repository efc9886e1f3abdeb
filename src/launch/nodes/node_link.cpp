#include "launch/nodes/node_link.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <system_error>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"
#include "store/records.hpp"

namespace mci::launch {

namespace {

// After ~NodeLink asks it to stop, the thread still tries this long to
// publish a failure or "done" (node 0 may be a moment away).
constexpr auto kFlushLimit = std::chrono::seconds(3);

}  // namespace

std::string attempt_key(int attempt, const std::string& name) { return keys::attempt(attempt, name); }

std::string NodeLink::key(const std::string& name) const { return attempt_key(opts_.attempt, name); }

std::optional<int> join_attempt(const NodeLinkOptions& o, std::chrono::milliseconds limit, SignalFd& signals) {
  const std::string joined = attempt_key(o.attempt, "joined");
  const std::string go = attempt_key(o.attempt, "go");
  const Deadline dl(limit);
  const auto client = o.store.connect(std::chrono::seconds(5), limit);
  TcpStore& store = *client;
  if (store.add(joined, 1) >= o.nnodes) store.set(go, to_bytes("1"));
  while (true) {
    try {
      store.wait({go}, o.slice);
      return std::nullopt;
    } catch (const TimeoutError&) {
      // not everyone yet
    }
    pollfd p{signals.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      for (int sig : signals.take()) {
        if (is_stop_signal(sig)) return sig;
      }
    }
    for (int n = 0; n < o.nnodes; ++n) {
      if (n != o.node_rank && node_is_gone(store, n)) {
        throw Error(fmt::format(
            "restart {}: node {}'s mcirun is gone (killed, or its host lost): a job of {} nodes (a fixed "
            "--nnodes) cannot start again without it, so it ends here rather than wait --rdzv_conf join_timeout; "
            "restart the job with the nodes there are",
            o.attempt, n, o.nnodes));
      }
    }
    if (dl.expired()) {
      const std::int64_t in = store.add(joined, 0);
      throw TimeoutError(
          fmt::format("restart {}: {} of the {} nodes came back within {} s; a node whose processes had all "
                      "finished, or whose mcirun is gone, does not restart (--rdzv_conf join_timeout=SECONDS "
                      "waits longer)",
                      o.attempt, in, o.nnodes, std::chrono::duration_cast<std::chrono::seconds>(limit).count()));
    }
  }
}

NodeLink::NodeLink(NodeLinkOptions opts) : opts_(std::move(opts)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "mcirun: pipe");
  }
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  try {
    first_ = connect_counted();
  } catch (const std::exception&) {
    // run() connects again, until stopped
  }
  thread_ = std::thread([this] { run(); });
}

std::unique_ptr<TcpStore> NodeLink::connect_counted() {
  auto store = opts_.store.connect(std::chrono::seconds(2), opts_.slice);
  if (opts_.node_rank != 0) count_connection(*store, conns_key(opts_.node_rank), gone_key(opts_.node_rank));
  return store;
}

NodeLink::~NodeLink() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void NodeLink::report_failure(const std::string& what) {
  {
    std::lock_guard lk(mu_);
    failure_to_publish_ = records::encode_node_news({opts_.node_rank, 0, what});
  }
  cv_.notify_all();
}

void NodeLink::report_stop(int sig, const std::string& where) {
  {
    std::lock_guard lk(mu_);
    failure_to_publish_ = records::encode_node_news({opts_.node_rank, sig, where});
  }
  cv_.notify_all();
}

std::optional<NodeLink::Event> NodeLink::parse_news(const std::string& v, int self) {
  records::NodeNews news;
  try {
    news = records::decode_node_news(v, "the news");
  } catch (const records::RecordError&) {
    return Event{EventKind::peer_failed, v};  // not from an mcirun of this version: said as it is
  }
  if (news.node == self) return std::nullopt;
  const std::string node = "node " + std::to_string(news.node);
  if (news.signal > 0) return Event{EventKind::peer_stopped, node + " (" + news.text + ")", news.signal};
  return Event{EventKind::peer_failed, node + ": " + news.text};
}

bool NodeLink::others_heard(TcpStore& store) {
  std::vector<std::string> waiting;
  for (int n = 1; n < opts_.nnodes; ++n) {
    if (!store.check({seen_key(n)}) && !store.check({done_key(n)})) waiting.push_back(seen_key(n));
  }
  if (waiting.empty()) return true;
  try {
    store.wait(waiting, opts_.slice);
    return true;
  } catch (const TimeoutError&) {
    return false;  // asked again next round: a node may say "done" instead
  }
}

void NodeLink::report_done() {
  {
    std::lock_guard lk(mu_);
    done_to_publish_ = true;
  }
  cv_.notify_all();
}

std::vector<NodeLink::Event> NodeLink::take_events() {
  char drain[64];
  while (::read(wake_read_.get(), drain, sizeof drain) > 0) {
  }
  std::lock_guard lk(mu_);
  return std::exchange(events_, {});
}

void NodeLink::post(Event e) {
  {
    std::lock_guard lk(mu_);
    events_.push_back(std::move(e));
  }
  const char one = 1;
  (void)!::write(wake_write_.get(), &one, 1);
}

// One round: take what the reporters left, publish it, then wait (at most
// a slice) on the news that matters now. Stops once asked to and nothing is
// left to say, or kFlushLimit after being asked.
void NodeLink::run() {
  Loop s;
  s.store = std::move(first_);
  s.finished.assign(static_cast<std::size_t>(opts_.nnodes), false);
  s.finished[0] = true;  // node 0 waits for the others only once it is done
  s.beats.assign(static_cast<std::size_t>(opts_.nnodes), {-1, Clock::now()});
  while (take_reports(s)) {
    try {
      // Connecting is retried by this loop until stopped.
      if (!s.store) s.store = connect_counted();
      publish(s);
      if (opts_.node_rank != 0 && Clock::now() >= s.next_beat) {
        s.store->add(key("beat/" + std::to_string(opts_.node_rank)), 1);
        s.next_beat = Clock::now() + std::chrono::seconds(1);
      }
      if (linger_for_others(s)) continue;
      {
        std::lock_guard lk(mu_);
        if (stop_ && !failure_to_publish_ && !done_to_publish_) return;  // all said; nobody listens now
      }
      watch(s);
    } catch (const TimeoutError&) {
      // node 0 is not listening yet: try again
      s.store.reset();
    } catch (const Error& e) {
      report_lost(s.store != nullptr, e.what());
      return;
    }
    put_back(s);
  }
}

bool NodeLink::take_reports(Loop& s) {
  std::lock_guard lk(mu_);
  const bool pending = failure_to_publish_ || done_to_publish_ || lingering(s);
  if (stop_) {
    if (!s.give_up) s.give_up = Clock::now() + kFlushLimit;
    if (!pending || Clock::now() >= *s.give_up) return false;
  }
  s.failure = std::exchange(failure_to_publish_, std::nullopt);
  s.done = std::exchange(done_to_publish_, false);
  return true;
}

void NodeLink::publish(Loop& s) {
  if (s.failure) {
    s.store->compare_set(failed_key(), {}, to_bytes(*s.failure));
    s.news_in_store = true;
    // Whoever came first, this node has its own news: node 0 need not wait for it.
    if (opts_.node_rank != 0) s.store->set(seen_key(opts_.node_rank), to_bytes("1"));
  }
  s.failure.reset();
  if (s.done) {
    s.store->set(done_key(opts_.node_rank), to_bytes("1"));
    s.done_published = true;
  }
  s.done = false;
}

bool NodeLink::lingering(const Loop& s) const {
  return opts_.node_rank == 0 && s.news_in_store && !s.others_heard_news;
}

bool NodeLink::linger_for_others(Loop& s) {
  if (!lingering(s)) return false;
  {
    std::lock_guard lk(mu_);
    if (!stop_) return false;
  }
  s.others_heard_news = others_heard(*s.store);
  return true;
}

// Waits on whichever news matters now: node 0, its own processes done,
// waits for the other nodes' "done" and only glances at "failed"; once the
// news was read, only for something to publish.
void NodeLink::watch(Loop& s) {
  const bool awaiting_nodes = opts_.node_rank == 0 && s.done_published && !s.all_done_posted;
  if (!awaiting_nodes && s.failure_seen) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, opts_.slice, [this] { return stop_ || failure_to_publish_ || done_to_publish_; });
    return;
  }
  if (awaiting_nodes) {
    const int running = look_at_nodes(s);
    nodes_running_ = running;
    if (running == 0) {
      s.all_done_posted = true;
      post({EventKind::all_done, {}});
    }
  }
  // Node 0 waits a slice on the first node still running; the others, and
  // node 0 once all are finished, on the news.
  std::vector<std::string> watched{failed_key()};
  for (int n = 1; awaiting_nodes && n < opts_.nnodes; ++n) {
    if (!s.finished[static_cast<std::size_t>(n)]) {
      watched = {done_key(n)};
      break;
    }
  }
  bool arrived = false;
  try {
    s.store->wait(watched, opts_.slice);
    arrived = true;
  } catch (const TimeoutError&) {
    // nothing new during this slice
  }
  const bool news = watched.front() == failed_key() ? arrived : s.store->check({failed_key()});
  if (!s.failure_seen && news) {
    s.failure_seen = true;
    s.news_in_store = true;
    const std::string v = to_string(s.store->get(failed_key(), opts_.slice));
    if (auto news = parse_news(v, opts_.node_rank)) post(std::move(*news));
    if (opts_.node_rank != 0) s.store->set(seen_key(opts_.node_rank), to_bytes("1"));
  }
}

int NodeLink::look_at_nodes(Loop& s) {
  int running = 0;
  for (int n = 1; n < opts_.nnodes; ++n) {
    auto&& finished = s.finished[static_cast<std::size_t>(n)];
    if (finished) continue;
    if (s.store->check({done_key(n)})) {
      finished = true;
      continue;
    }
    if (all_closed(*s.store, conns_key(n), gone_key(n))) {
      finished = true;
      post({EventKind::peer_gone, fmt::format("node {}'s mcirun is gone before its processes finished (it was "
                                              "killed, or its host was lost)",
                                              n)});
      continue;
    }
    // A cut link closes nothing: silence says it.
    auto& [beat, moved] = s.beats[static_cast<std::size_t>(n)];
    const std::int64_t now_beat = s.store->add(key("beat/" + std::to_string(n)), 0);
    if (now_beat != beat) {
      beat = now_beat;
      moved = Clock::now();
    } else if (Clock::now() - moved > opts_.silence_limit) {
      finished = true;
      post({EventKind::peer_gone,
            fmt::format("node {} has been silent for {} s (its host lost, or its link cut; MCI_NODE_SILENCE_MS)", n,
                        std::chrono::duration_cast<std::chrono::seconds>(opts_.silence_limit).count())});
      continue;
    }
    ++running;
  }
  return running;
}

// What was taken but could not be published goes back for the next round.
void NodeLink::put_back(Loop& s) {
  std::lock_guard lk(mu_);
  if (s.failure && !failure_to_publish_) failure_to_publish_ = s.failure;
  if (s.done) done_to_publish_ = true;
}

void NodeLink::report_lost(bool reached, const std::string& what) {
  std::lock_guard lk(mu_);
  if (stop_) return;
  events_.push_back({reached ? EventKind::store_lost : EventKind::unreachable, what});
  const char one = 1;
  (void)!::write(wake_write_.get(), &one, 1);
}

}  // namespace mci::launch
