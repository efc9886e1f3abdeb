// The job's store on etcd (v3 API, through etcd's JSON gateway): the same
// Store interface as mci's own TCP store, so a job's control plane can live
// on a replicated store that survives any one machine (issue 50). Built when
// cpp-httplib is found (MCI_WITH_ETCD).
//
// Every key lives under /mci/JOB/ (JOB: the job's id), so two jobs never see
// each other's keys. Writes that read first (add, compare_set, append) are
// transactions on the key's mod revision, retried when another client won;
// waits (get, wait, get_range) watch the job's keys from the revision they
// read and read again on any change, so a wait costs one request per change,
// not a poll. What etcd cannot do is append_on_close (a death certificate
// written by the server when a client's connection ends): ranks reach etcd
// through their node's StoreRelay (store_relay.hpp), which can, and whose
// promises outlive it on etcd's leases.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "mci/store.hpp"

namespace mci {

class EtcdChanges;

struct EtcdStoreOptions {
  // "host:port" or "http://host:port", tried in turn (torchrun's
  // --rdzv_endpoint, comma-separated). A request goes to the first that
  // answers; a member that stops answering is skipped.
  std::vector<std::string> endpoints;
  std::string job_id;                                                  // the job's keys live under PREFIX/JOB/
  std::string prefix = "/mci";                                         // torchrun's etcd_prefix
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};          // a wait's default
  std::chrono::milliseconds request_timeout{std::chrono::seconds(5)};  // one request, at most
  // Every key this client writes is under this lease (0: none): the job's
  // lease, which the relays keep alive (store_relay.hpp), so that a dead
  // job's keys expire.
  std::int64_t lease = 0;
  // Where waits learn of changes: one watch shared by every client of a
  // process (a relay's), instead of a watch of its own per wait.
  std::shared_ptr<EtcdChanges> changes;
  // TLS (torchrun's --rdzv_conf protocol=https, cacert, cert, key): the
  // members' certificates are checked against `cacert` (the system's CAs
  // when empty), and `cert`/`key`, when given, prove this client to a
  // cluster started with --client-cert-auth. "https://" endpoints ask for
  // it too.
  bool https = false;
  std::string cacert;
  std::string cert;
  std::string key;
};

// One watch on a job's keys, kept by a thread of its own and moved to
// another member when one fails: what the waits of every EtcdStore given
// it learn changes from. A relay's clients thus cost etcd one watch per
// node, not a watch per waiting request.
class EtcdChanges {
 public:
  // Starts watching the job's keys from etcd's present revision.
  explicit EtcdChanges(const EtcdStoreOptions& o);
  ~EtcdChanges();
  EtcdChanges(const EtcdChanges&) = delete;
  EtcdChanges& operator=(const EtcdChanges&) = delete;

  // Waits until a key in [from, to) (`to` empty: the key `from` alone; both
  // empty: any key of the job) changed after `revision`, or the watch had
  // to start over (a change may have been missed), or `until`, or wake():
  // true unless the time ran out.
  bool wait(std::int64_t revision, const std::string& from, const std::string& to,
            std::chrono::steady_clock::time_point until, const std::atomic<bool>& interrupted);
  // Wakes every wait (to look at its interrupted flag).
  void wake();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class EtcdStore final : public Store {
 public:
  // Reaches one endpoint first (at most request_timeout each): a wrong
  // endpoint is an error naming every endpoint tried and what each said.
  explicit EtcdStore(EtcdStoreOptions o);
  ~EtcdStore() override;
  EtcdStore(const EtcdStore&) = delete;
  EtcdStore& operator=(const EtcdStore&) = delete;

  using Store::get;
  using Store::wait;
  void set(const std::string& key, const StoreValue& value) override;
  StoreValue get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  StoreValue compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) override;
  StoreValue append(const std::string& key, const StoreValue& value) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::vector<std::optional<StoreValue>> get_range(const std::string& prefix, std::int64_t first, std::int64_t count,
                                                   const std::string& stop, std::chrono::milliseconds timeout) override;
  bool remove(const std::string& key) override;
  std::int64_t num_keys() override;
  std::shared_ptr<Store> clone() const override;
  // The member that answered last ("host:port"): where a new client of the
  // same cluster should start.
  std::string endpoint_in_use() const;
  // Ends a wait in progress on another thread (it throws Error); every call
  // after fails the same way.
  void interrupt() override;

  // Leases: a key written under one is deleted when the lease is revoked or
  // not kept alive for its TTL (etcd raises a TTL below its minimum, about
  // 1.5 s with its default election timeout, to that minimum). A lease's id;
  // the TTL it was granted in `granted`.
  std::int64_t grant_lease(std::chrono::seconds ttl, std::chrono::seconds* granted = nullptr);
  // Renews it; false when it has ended (expired or revoked).
  bool keep_alive(std::int64_t lease);
  void revoke_lease(std::int64_t lease);
  void set(const std::string& key, const StoreValue& value, std::int64_t lease);
  // The keys' values as they are now (nullopt: not there), read in one
  // transaction (one per 128 keys) within `budget`: what a timed-out range
  // had. Throws PeerError when etcd did not answer in time.
  std::vector<std::optional<StoreValue>> read(const std::vector<std::string>& keys, std::chrono::milliseconds budget);
  // In one transaction, only if every key in `claims` still exists: deletes
  // them and appends each value to its key. False when a claim was gone
  // (another client settled it first). How a relay writes the promises of
  // a connection that ended: all of a rank's certificates at once, once.
  bool settle(const std::vector<std::string>& claims, const std::vector<std::pair<std::string, StoreValue>>& appends);
  // Every key under each prefix with its value, all read at one revision
  // (one transaction); keys are given without the job's namespace.
  std::vector<std::vector<std::pair<std::string, StoreValue>>> list(const std::vector<std::string>& prefixes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mci
