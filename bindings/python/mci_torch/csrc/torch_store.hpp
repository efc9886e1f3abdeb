// torch's own store (c10d::Store) over mci's store client: what torch's
// env:// meets on when mcirun keeps the job's store on etcd
// (MCI_TORCH_STORE=mci; mci_torch/_torch_store.py installs it). Every
// node's mcirun serves its ranks a relay that writes through to etcd, so
// torch's keys (init's barrier, new groups, a shrunk group's store, the
// replacement's join) outlive any node, node 0 included; a TCPStore
// hosted by rank 0 or by node 0's launcher does not.
//
// Keys live under `prefix` in the job's store. Semantics follow torch's
// TCPStore where the two stores differ (compareSet on a missing key; a
// timeout is torch's DistStoreError, which torch's own callers catch).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "mci/store.hpp"

namespace mci_torch {

class TorchStoreOverMci final : public c10d::Store {
 public:
  // Connects to the store at address (waiting for it at most `timeout`,
  // which is also each operation's default patience). Throws mci's errors.
  TorchStoreOverMci(mci::StoreAddress address, std::string prefix, std::chrono::milliseconds timeout);

  c10::intrusive_ptr<c10d::Store> clone() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) override;
  bool hasExtendedApi() const override { return true; }

  const mci::StoreAddress& address() const { return address_; }
  const std::string& prefix() const { return prefix_; }

 private:
  mci::StoreAddress address_;
  std::string prefix_;
  std::shared_ptr<mci::Store> store_;  // a PrefixStore over one connection
};

}  // namespace mci_torch
