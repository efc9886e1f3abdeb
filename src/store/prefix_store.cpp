#include "mci/store.hpp"

namespace mci {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  set_timeout(base_->timeout());
}

std::shared_ptr<Store> PrefixStore::clone() const {
  auto base = base_->clone();
  if (!base) return nullptr;
  return std::make_shared<PrefixStore>(prefix_, std::move(base));
}

std::vector<std::string> PrefixStore::k(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(k(key));
  return out;
}

void PrefixStore::set(const std::string& key, const StoreValue& value) { base_->set(k(key), value); }
StoreValue PrefixStore::get(const std::string& key, std::chrono::milliseconds t) { return base_->get(k(key), t); }
std::int64_t PrefixStore::add(const std::string& key, std::int64_t d) { return base_->add(k(key), d); }
StoreValue PrefixStore::compare_set(const std::string& key, const StoreValue& e, const StoreValue& d) {
  return base_->compare_set(k(key), e, d);
}
StoreValue PrefixStore::append(const std::string& key, const StoreValue& v) { return base_->append(k(key), v); }
bool PrefixStore::append_on_close(const std::string& key, const StoreValue& v) {
  return base_->append_on_close(k(key), v);
}
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) { base_->wait(k(keys), t); }
bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(k(keys)); }
std::vector<std::optional<StoreValue>> PrefixStore::get_range(const std::string& prefix, std::int64_t first,
                                                              std::int64_t count, const std::string& stop,
                                                              std::chrono::milliseconds t) {
  return base_->get_range(k(prefix), first, count, stop.empty() ? stop : k(stop), t);
}
bool PrefixStore::remove(const std::string& key) { return base_->remove(k(key)); }
std::int64_t PrefixStore::num_keys() { return base_->num_keys(); }

}  // namespace mci
