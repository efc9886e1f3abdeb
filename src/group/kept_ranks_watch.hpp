// While a group's survivors (shrink) or members (grow) form the next group,
// a member of the decision that dies before it reaches the new group has no
// death certificate there yet (join_group registers it first thing): the
// others would wait for it until the check-in's timeout. Its certificate in
// the group it leaves (the store appends it to that group's "gone") is
// watched instead, and its death written where the new group's agreements
// read it (certify_lost_member, join.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mci/store.hpp"

namespace mci {

class KeptRanksWatch {
 public:
  // `group`: the store of the group being left (its "gone" list); `base`:
  // the job's store; `root`: where the new group forms; `kept[i]`: the rank
  // in the group being left of the new group's rank i (-1: a newcomer, not
  // watched). The watch runs on connections of its own (clones), since the
  // caller's are blocked in the new group's agreements; a store that cannot
  // clone is not watched (the agreements still end at their timeout).
  KeptRanksWatch(const std::shared_ptr<Store>& group, const std::shared_ptr<Store>& base, std::string root,
                 std::vector<int> kept, std::chrono::milliseconds poll);
  ~KeptRanksWatch();
  KeptRanksWatch(const KeptRanksWatch&) = delete;
  KeptRanksWatch& operator=(const KeptRanksWatch&) = delete;

 private:
  void watch();

  std::shared_ptr<Store> group_, base_;
  std::string root_;
  std::vector<int> kept_;
  std::chrono::milliseconds poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mci
