#include "group/kept_ranks_watch.hpp"

#include <set>

#include "common/log.hpp"
#include "group/join.hpp"

namespace mci {

KeptRanksWatch::KeptRanksWatch(const std::shared_ptr<Store>& group, const std::shared_ptr<Store>& base,
                               std::string root, std::vector<int> kept, std::chrono::milliseconds poll)
    : group_(group->clone()), base_(base->clone()), root_(std::move(root)), kept_(std::move(kept)), poll_(poll) {
  if (group_ && base_) thread_ = std::thread([this] { watch(); });
}

KeptRanksWatch::~KeptRanksWatch() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KeptRanksWatch::watch() {
  try {
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, poll_, [&] { return stop_; })) {
      lk.unlock();
      const std::set<int> gone = certified_gone(*group_);
      for (std::size_t i = 0; i < kept_.size(); ++i) {
        if (kept_[i] >= 0 && gone.count(kept_[i])) {
          certify_lost_member(*base_, root_, static_cast<int>(i));
          return;
        }
      }
      lk.lock();
    }
  } catch (const std::exception& e) {
    // The others' own waits still end at their timeout.
    log::debug("watching the members of a group being formed stopped: {}", e.what());
  }
}

}  // namespace mci
