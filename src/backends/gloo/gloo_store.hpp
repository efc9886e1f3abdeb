// Gloo's rendezvous store (set, get, wait) over mci's store, so Gloo meets its
// peers through the job's authenticated store and every wait of its
// rendezvous is bounded by the group's init deadline.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "common/deadline.hpp"
#include "mci/store.hpp"

namespace mci::gloo_backend {

class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  // Keys go under "<prefix>/" of `base` (already namespaced for the group),
  // so Gloo's keys ("0", "1", ...) never meet mci's own.
  GlooStore(std::shared_ptr<mci::Store> base, std::string prefix, Deadline deadline);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Gloo reads a key only after waiting for it; get still waits (bounded) so
  // a caller that skips the wait cannot read a missing key.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // What get() returned for `key`: Gloo reads each peer's addresses once,
  // and the backend needs them again to tell which peer Gloo's errors name.
  std::optional<std::vector<char>> fetched(const std::string& key) const;

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  // The shorter of Gloo's own timeout and what is left of the init budget.
  std::chrono::milliseconds budget(std::chrono::milliseconds asked) const;

  std::shared_ptr<mci::Store> base_;
  std::string prefix_;
  Deadline deadline_;
  std::map<std::string, std::vector<char>> fetched_;
};

}  // namespace mci::gloo_backend
