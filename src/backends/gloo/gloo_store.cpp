#include "backends/gloo/gloo_store.hpp"

#include <algorithm>

namespace mci::gloo_backend {

GlooStore::GlooStore(std::shared_ptr<mci::Store> base, std::string prefix, Deadline deadline)
    : base_(std::move(base)), prefix_(std::move(prefix)), deadline_(deadline) {}

std::chrono::milliseconds GlooStore::budget(std::chrono::milliseconds asked) const {
  // At least 1ms: a zero timeout means "no wait at all" to some stores, and
  // an expired budget must still end in a TimeoutError, not a hang.
  const std::chrono::milliseconds left{deadline_.poll_ms()};
  const std::chrono::milliseconds t = asked.count() > 0 ? std::min(asked, left) : left;
  return std::max(t, std::chrono::milliseconds(1));
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  base_->set(k(key), StoreValue(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const StoreValue b = base_->get(k(key), budget(std::chrono::milliseconds(0)));
  std::vector<char> v(b.begin(), b.end());
  fetched_[key] = v;
  return v;
}

std::optional<std::vector<char>> GlooStore::fetched(const std::string& key) const {
  const auto it = fetched_.find(key);
  if (it == fetched_.end()) return std::nullopt;
  return it->second;
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, std::chrono::milliseconds(0)); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& key : keys) full.push_back(k(key));
  base_->wait(full, budget(timeout));
}

}  // namespace mci::gloo_backend
