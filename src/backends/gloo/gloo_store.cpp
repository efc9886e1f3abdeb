#include "backends/gloo/gloo_store.hpp"

#include <algorithm>

namespace mci::gloo_backend {

GlooStore::GlooStore(std::shared_ptr<mci::Store> base, std::string prefix, Deadline deadline)
    : base_(std::move(base)), prefix_(std::move(prefix)), deadline_(deadline) {}

Millis GlooStore::budget(Millis asked) const {
  // At least 1ms: a zero timeout means "no wait at all" to some stores, and
  // an expired budget must still end in a TimeoutError, not a hang.
  const Millis left{deadline_.poll_ms()};
  const Millis t = asked.count() > 0 ? std::min(asked, left) : left;
  return std::max(t, Millis(1));
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  base_->set(k(key), Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const Bytes b = base_->get(k(key), budget(Millis(0)));
  std::vector<char> v(b.begin(), b.end());
  fetched_[key] = v;
  return v;
}

std::optional<std::vector<char>> GlooStore::fetched(const std::string& key) const {
  const auto it = fetched_.find(key);
  if (it == fetched_.end()) return std::nullopt;
  return it->second;
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, Millis(0)); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& key : keys) full.push_back(k(key));
  base_->wait(full, budget(timeout));
}

}  // namespace mci::gloo_backend
