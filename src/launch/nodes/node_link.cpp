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
  thread_ = std::thread([this] { run(); });
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

void NodeLink::run() {
  std::unique_ptr<TcpStore> store;
  std::optional<Clock::time_point> give_up;
  bool failure_seen = false;
  bool all_done_posted = false;
  bool done_published = false;
  // Node 0: the store holds news (a failure or a stop) the other nodes must
  // read before it closes.
  bool news_in_store = false;
  bool others_heard_news = false;
  std::vector<std::string> done_keys;
  for (int n = 0; n < opts_.nnodes; ++n) done_keys.push_back(done_key(n));

  while (true) {
    std::optional<std::string> failure;
    bool done = false;
    {
      std::lock_guard lk(mu_);
      const bool linger = opts_.node_rank == 0 && news_in_store && !others_heard_news;
      const bool pending = failure_to_publish_ || done_to_publish_ || linger;
      if (stop_) {
        if (!give_up) give_up = Clock::now() + kFlushLimit;
        if (!pending || Clock::now() >= *give_up) return;
      }
      failure = std::exchange(failure_to_publish_, std::nullopt);
      done = std::exchange(done_to_publish_, false);
    }
    try {
      if (!store) {
        // Connecting is retried by this loop until stopped.
        store = opts_.store.connect(std::chrono::seconds(2), opts_.slice);
      }
      if (failure) {
        store->compare_set(failed_key(), {}, to_bytes(*failure));
        news_in_store = true;
        // Whoever came first, this node has its own news: node 0 need not wait for it.
        if (opts_.node_rank != 0) store->set(seen_key(opts_.node_rank), to_bytes("1"));
      }
      failure.reset();
      if (done) {
        store->set(done_key(opts_.node_rank), to_bytes("1"));
        done_published = true;
      }
      done = false;
      if (opts_.node_rank == 0 && news_in_store && !others_heard_news) {
        bool stopping = false;
        {
          std::lock_guard lk(mu_);
          stopping = stop_;
        }
        if (stopping) {
          others_heard_news = others_heard(*store);
          continue;
        }
      }
      {
        std::lock_guard lk(mu_);
        if (stop_ && !failure_to_publish_ && !done_to_publish_) return;  // all said; nobody listens now
      }
      // Wait on whichever news matters now: node 0, its own processes done,
      // waits for the other nodes' "done" and only glances at "failed".
      const bool awaiting_nodes = opts_.node_rank == 0 && done_published && !all_done_posted;
      const std::vector<std::string> watched = awaiting_nodes ? done_keys : std::vector<std::string>{failed_key()};
      if (awaiting_nodes || !failure_seen) {
        bool arrived = false;
        try {
          store->wait(watched, opts_.slice);
          arrived = true;
        } catch (const TimeoutError&) {
          // nothing new during this slice
        }
        if (awaiting_nodes && arrived) {
          all_done_posted = true;
          post({EventKind::all_done, {}});
        }
        if (!failure_seen && (awaiting_nodes ? store->check({failed_key()}) : arrived)) {
          failure_seen = true;
          news_in_store = true;
          const std::string v = to_string(store->get(failed_key(), opts_.slice));
          if (auto news = parse_news(v, opts_.node_rank)) post(std::move(*news));
          if (opts_.node_rank != 0) store->set(seen_key(opts_.node_rank), to_bytes("1"));
        }
      } else {
        std::unique_lock lk(mu_);
        cv_.wait_for(lk, opts_.slice, [this] { return stop_ || failure_to_publish_ || done_to_publish_; });
      }
    } catch (const TimeoutError&) {
      // node 0 is not listening yet: try again
      store.reset();
    } catch (const Error& e) {
      const bool reached = store != nullptr;
      std::lock_guard lk(mu_);
      if (stop_) return;
      events_.push_back({reached ? EventKind::store_lost : EventKind::unreachable, e.what()});
      const char one = 1;
      (void)!::write(wake_write_.get(), &one, 1);
      return;
    }
    {
      // What we took but could not publish goes back for the next round.
      std::lock_guard lk(mu_);
      if (failure && !failure_to_publish_) failure_to_publish_ = failure;
      if (done) done_to_publish_ = true;
    }
  }
}

}  // namespace mci::launch
