#include "launch/nodes/node_adopter.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

#include <fmt/format.h>

#include "common/log.hpp"
#include "launch/nodes/node_link.hpp"
#include "mci/errors.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"

namespace mci::launch {

NodeAdopter::NodeAdopter(NodeAdopterOptions o) : o_(std::move(o)), settled_(static_cast<std::size_t>(o_.nnodes)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "mcirun: pipe");
  }
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  settled_[static_cast<std::size_t>(o_.node_rank)] = true;
  thread_ = std::thread([this] { run(); });
}

NodeAdopter::~NodeAdopter() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<int> NodeAdopter::take() {
  char buf[64];
  while (::read(wake_read_.get(), buf, sizeof buf) > 0) {
  }
  std::lock_guard lk(mu_);
  return std::exchange(claimed_, {});
}

std::vector<int> NodeAdopter::look(Store& store) {
  std::vector<int> mine;
  const std::string me = std::to_string(o_.node_rank);
  for (int n = 0; n < o_.nnodes; ++n) {
    auto&& settled = settled_[static_cast<std::size_t>(n)];
    if (settled) continue;
    // Finished first, then gone: a node's "done" is published before its
    // mcirun exits, so a node that ended well never reads as lost.
    if (store.check({attempt_key(o_.attempt, "done/" + std::to_string(n))})) {
      settled = true;
      continue;
    }
    if (!node_is_gone(store, n)) continue;
    settled = true;
    const std::string key = attempt_key(o_.attempt, "adopt/" + std::to_string(n));
    if (to_string(store.compare_set(key, {}, to_bytes(me))) == me) mine.push_back(n);
  }
  return mine;
}

void NodeAdopter::run() {
  std::unique_ptr<TcpStore> store;
  std::unique_lock lk(mu_);
  while (!stop_) {
    lk.unlock();
    std::vector<int> mine;
    try {
      if (!store) store = o_.store.connect(std::chrono::seconds(5), std::chrono::seconds(2));
      mine = look(*store);
    } catch (const std::exception& e) {
      // The store out of reach: the node's link says so to the event loop;
      // this one tries again at its next round.
      log::debug("mcirun: watching the other nodes for lost ones: {}", e.what());
      store.reset();
    }
    lk.lock();
    if (!mine.empty()) {
      claimed_.insert(claimed_.end(), mine.begin(), mine.end());
      const char one = 1;
      (void)!::write(wake_write_.get(), &one, 1);
    }
    cv_.wait_for(lk, o_.poll, [this] { return stop_; });
  }
}

}  // namespace mci::launch
