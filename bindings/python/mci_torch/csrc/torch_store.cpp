#include "torch_store.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "mci/errors.hpp"

namespace mci_torch {
namespace {

// mci's errors as the types torch's own stores throw, so that torch's
// callers (which catch DistStoreError for a timeout) and Python
// (torch.distributed.DistStoreError, DistNetworkError) see what they know;
// the text stays mci's (what went wrong, and what to do).
template <typename F>
auto torch_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const mci::TimeoutError& e) {
    C10_THROW_ERROR(DistStoreError, e.what());
  } catch (const mci::PeerError& e) {
    C10_THROW_ERROR(DistNetworkError, e.what());
  } catch (const mci::Error& e) {
    C10_THROW_ERROR(DistError, e.what());
  }
}

constexpr std::chrono::milliseconds kConnectLimit{60'000};

std::vector<uint8_t> bytes(mci::StoreValue v) { return {v.begin(), v.end()}; }
mci::StoreValue value(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

TorchStoreOverMci::TorchStoreOverMci(mci::StoreAddress address, std::string prefix, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), address_(std::move(address)), prefix_(std::move(prefix)) {
  torch_errors([&] {
    // The relay is this node's mcirun, up before the ranks: a minute is
    // ample even when the operations' own patience is longer.
    std::shared_ptr<mci::Store> conn = address_.connect(timeout, std::min(timeout, kConnectLimit));
    store_ = std::make_shared<mci::PrefixStore>(prefix_, std::move(conn));
    return 0;
  });
}

c10::intrusive_ptr<c10d::Store> TorchStoreOverMci::clone() {
  return c10::make_intrusive<TorchStoreOverMci>(address_, prefix_, timeout_);
}

void TorchStoreOverMci::set(const std::string& key, const std::vector<uint8_t>& v) {
  torch_errors([&] {
    store_->set(key, value(v));
    return 0;
  });
}

std::vector<uint8_t> TorchStoreOverMci::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                                   const std::vector<uint8_t>& desired) {
  return torch_errors([&] {
    auto after = store_->compare_set(key, value(expected), value(desired));
    // torch's TCPStore answers a missing key with a non-empty expected by
    // returning expected (its callers compare against desired); mci's
    // store answers with the key's value, empty. Say what torch says.
    if (after.empty() && !expected.empty() && !store_->check({key})) return expected;
    return bytes(std::move(after));
  });
}

std::vector<uint8_t> TorchStoreOverMci::get(const std::string& key) {
  return torch_errors([&] { return bytes(store_->get(key, timeout_)); });
}

int64_t TorchStoreOverMci::add(const std::string& key, int64_t delta) {
  return torch_errors([&] { return store_->add(key, delta); });
}

bool TorchStoreOverMci::deleteKey(const std::string& key) {
  return torch_errors([&] { return store_->remove(key); });
}

bool TorchStoreOverMci::check(const std::vector<std::string>& keys) {
  return torch_errors([&] { return store_->check(keys); });
}

int64_t TorchStoreOverMci::getNumKeys() {
  return torch_errors([&] { return store_->num_keys(); });
}

void TorchStoreOverMci::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TorchStoreOverMci::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  torch_errors([&] {
    store_->wait(keys, timeout);
    return 0;
  });
}

void TorchStoreOverMci::append(const std::string& key, const std::vector<uint8_t>& v) {
  torch_errors([&] { return store_->append(key, value(v)).size(); });
}

std::vector<std::vector<uint8_t>> TorchStoreOverMci::multiGet(const std::vector<std::string>& keys) {
  return torch_errors([&] {
    std::vector<std::vector<uint8_t>> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(bytes(store_->get(k, timeout_)));
    return out;
  });
}

void TorchStoreOverMci::multiSet(const std::vector<std::string>& keys,
                                 const std::vector<std::vector<uint8_t>>& values) {
  TORCH_CHECK(keys.size() == values.size(), "multiSet: ", keys.size(), " keys but ", values.size(), " values");
  torch_errors([&] {
    for (std::size_t i = 0; i < keys.size(); ++i) store_->set(keys[i], value(values[i]));
    return 0;
  });
}

}  // namespace mci_torch
