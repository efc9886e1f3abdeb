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

void NodeAdopter::look(Store& store) {
  const std::string me = std::to_string(o_.node_rank);
  for (int n = 0; n < o_.nnodes; ++n) {
    auto&& settled = settled_[static_cast<std::size_t>(n)];
    if (settled) continue;
    // Gone first, then finished: a node's "done" is written before its
    // presence closes, so a node read gone and not done was lost (the
    // other order took a node that finished between the reads).
    if (!node_is_gone(store, n)) continue;
    if (store.check({attempt_key(o_.attempt, "done/" + std::to_string(n))})) {
      settled = true;
      continue;
    }
    if (!accepting_.load() || room_.load() < o_.nproc.at(static_cast<std::size_t>(n))) continue;
    const std::string key = attempt_key(o_.attempt, "adopt/" + std::to_string(n));
    // A claim asked again after a lost answer finds its own name.
    const std::string who = to_string(store.compare_set(key, {}, to_bytes(me)));
    settled = true;
    if (who != me) continue;
    std::lock_guard lk(mu_);
    claimed_.push_back(n);
    const char one = 1;
    (void)!::write(wake_write_.get(), &one, 1);
  }
}

void NodeAdopter::run() {
  std::unique_ptr<TcpStore> store;
  std::unique_lock lk(mu_);
  while (!stop_) {
    lk.unlock();
    try {
      if (!store) store = o_.store.connect(std::chrono::seconds(5), std::chrono::seconds(2));
      look(*store);
    } catch (const std::exception& e) {
      // The store out of reach: the node's link says so to the event loop;
      // this one tries again at its next round.
      log::debug("mcirun: watching the other nodes for lost ones: {}", e.what());
      store.reset();
    }
    lk.lock();
    cv_.wait_for(lk, o_.poll, [this] { return stop_; });
  }
}

}  // namespace mci::launch
