// The rendezvous key-value store: a TCP server any process can host (the
// launcher does; without one, rank 0 does) and a client per process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mci {

// A value in the store: bytes, whatever they encode.
using StoreValue = std::vector<std::uint8_t>;

StoreValue to_bytes(std::string_view s);
std::string to_string(const StoreValue& b);

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const StoreValue& value) = 0;
  // Waits until the key exists, at most the timeout; throws TimeoutError.
  virtual StoreValue get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  StoreValue get(const std::string& key) { return get(key, timeout()); }
  // Atomic counter: adds delta (missing key = 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Sets desired if the current value equals expected (a missing key equals
  // an empty expected); returns the value after the call.
  virtual StoreValue compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) = 0;
  // Appends value to the key's value (a missing key is empty) and returns the
  // value after, in one atomic step. The default retries compare_set.
  virtual StoreValue append(const std::string& key, const StoreValue& value);
  // When this client's connection ends (the process exits, is killed, or
  // destroys the client), the server appends value to key. A group's
  // survivors read it to know who is gone without waiting for a timeout.
  // False where the store cannot (only mci's TCP store can).
  virtual bool append_on_close(const std::string& /*key*/, const StoreValue& /*value*/) { return false; }
  // Waits until every key exists, at most the given timeout.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // True if every key exists now; never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // The keys PREFIX/first .. PREFIX/(first+count-1) in one request: waits
  // until every one exists, or until the key `stop` does (if not empty),
  // at most the timeout (then TimeoutError). Missing keys (only when
  // stopped) come back empty. A rendezvous of n ranks costs the store n such
  // requests instead of n*n gets. The default asks for each key in turn.
  virtual std::vector<std::optional<StoreValue>> get_range(const std::string& prefix, std::int64_t first,
                                                           std::int64_t count, const std::string& stop,
                                                           std::chrono::milliseconds timeout);
  virtual bool remove(const std::string& key) = 0;
  virtual std::int64_t num_keys() = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  // A second, independent connection to the same store (for a thread that
  // blocks on it), or nullptr if this store cannot make one.
  virtual std::shared_ptr<Store> clone() const { return nullptr; }
  // Unblocks a call in progress on another thread; the store is closed after.
  virtual void interrupt() {}

 private:
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
};

struct StoreServerOptions {
  std::string host = "127.0.0.1";  // address to bind; "0.0.0.0" for all
  int port = 0;                    // 0: the OS picks a free port
  std::string token;               // job token clients must prove (empty: none)
};

// Serves the store from a background thread until destroyed.
class StoreServer {
 public:
  explicit StoreServer(const StoreServerOptions& opts);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;
  const std::string& host() const;
  // Connections dropped for malformed or unauthenticated frames.
  std::uint64_t rejected_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // per operation
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  std::string token;  // job token (empty: none)
};

class TcpStore final : public Store {
 public:
  explicit TcpStore(const TcpStoreOptions& opts);
  ~TcpStore() override;

  void set(const std::string& key, const StoreValue& value) override;
  using Store::get;
  StoreValue get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  StoreValue compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) override;
  StoreValue append(const std::string& key, const StoreValue& value) override;
  bool append_on_close(const std::string& key, const StoreValue& value) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::vector<std::optional<StoreValue>> get_range(const std::string& prefix, std::int64_t first, std::int64_t count,
                                                   const std::string& stop, std::chrono::milliseconds timeout) override;
  bool remove(const std::string& key) override;
  std::int64_t num_keys() override;

  std::shared_ptr<Store> clone() const override;
  void interrupt() override;

  // The local address this client uses to reach the server: the interface a
  // rank should listen on for its peers.
  std::string local_address() const;
  // Holds the connection idle, at most `timeout`: true as soon as the server
  // closes it (it exited, or was killed). How one store relay watches
  // another (store_relay.hpp).
  bool wait_for_close(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Where a job's store listens and the token that opens it: what every
// client of one job shares. Each user states its own patience where it
// connects (an init waits its group's timeout, a launcher's watcher a few
// seconds).
struct StoreAddress {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;  // job token (empty: none)

  // A client's options: each operation waits up to `timeout`, the first
  // connection is tried again for up to `connect_timeout`.
  TcpStoreOptions options(std::chrono::milliseconds timeout,
                          std::chrono::milliseconds connect_timeout = TcpStoreOptions{}.connect_timeout) const;
  // A connected client; throws as TcpStore's constructor does.
  std::unique_ptr<TcpStore> connect(std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout) const;
  // The same, connecting for as long as TcpStoreOptions' default allows.
  std::unique_ptr<TcpStore> connect(std::chrono::milliseconds timeout) const {
    return connect(timeout, TcpStoreOptions{}.connect_timeout);
  }
};

// Namespaces keys ("prefix/key") so groups and generations never collide.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const StoreValue& value) override;
  using Store::get;
  StoreValue get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  StoreValue compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) override;
  StoreValue append(const std::string& key, const StoreValue& value) override;
  bool append_on_close(const std::string& key, const StoreValue& value) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::vector<std::optional<StoreValue>> get_range(const std::string& prefix, std::int64_t first, std::int64_t count,
                                                   const std::string& stop, std::chrono::milliseconds timeout) override;
  bool remove(const std::string& key) override;
  std::int64_t num_keys() override;

  std::shared_ptr<Store> clone() const override;
  void interrupt() override { base_->interrupt(); }

  Store& base() { return *base_; }
  std::shared_ptr<Store> base_ptr() const { return base_; }

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> k(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace mci
