// A node's door to the job's store on etcd. The node's ranks and its mcirun
// speak mci's own store protocol to it, as to mci's store server, and it
// carries each request to etcd: a rank needs nothing new, and etcd sees one
// client process per node, not one per rank. What etcd cannot do, a relay
// does:
//  - append_on_close (a death certificate): the relay holds each
//    connection's promises and writes them when the connection ends (a rank
//    killed or exited: its kernel closes the socket), also while a request
//    of that connection is still waiting on etcd;
//  - a relay that dies with its node cannot, so each promise is also written
//    to etcd (mci/relay/promise/RELAY/N) beside a key under the relay's
//    lease (mci/relay/alive/RELAY). Every relay looks, a few times a second,
//    for promises whose relay's lease has ended and keeps them, once: the
//    delete that claims a promise succeeds for one relay only. A lost node's
//    certificates thus come within its lease's TTL.
// Every key of the job is under the job's lease, which every relay keeps
// alive: a dead job's keys expire, and two jobs never see each other's (their
// ids differ). A relay whose own lease ended while it ran (its node cut off from etcd for
// longer than the TTL) has had its promises kept by the others: its clients
// are counted gone, so it closes their connections and refuses new ones,
// and its ranks stop instead of running on beside a group that left them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "store/etcd_store.hpp"

namespace mci {

struct StoreRelayOptions {
  std::string host = "127.0.0.1";  // where the node's processes reach it
  int port = 0;                    // 0: a free one
  std::string token;               // the job token its clients must prove (empty: none)
  EtcdStoreOptions etcd;
  // The lease behind this relay's promises: how long after its node is lost
  // the others keep them. etcd raises it to its own minimum.
  std::chrono::seconds lease_ttl{2};
  std::chrono::milliseconds sweep_every{100};  // how often it looks for others' promises
};

class StoreRelay {
 public:
  // Reaches etcd (throws as EtcdStore does) and starts serving.
  explicit StoreRelay(StoreRelayOptions o);
  ~StoreRelay();
  StoreRelay(const StoreRelay&) = delete;
  StoreRelay& operator=(const StoreRelay&) = delete;

  int port() const;
  const std::string& host() const;
  // This relay's name in etcd's keys: host, pid and a random part.
  const std::string& id() const;
  // The TTL etcd granted the lease.
  std::chrono::seconds lease_ttl() const;
  // The lease behind its promises (a test ends it to cut the relay off).
  std::int64_t lease() const;
  // Its lease ended while it ran: its clients were counted gone.
  bool lost() const;
  // Why it last failed to reach etcd ("" when it never did): what a node
  // whose store connections it closed says.
  std::string trouble() const;
  // Ends the job's lease: every key of the job goes at once (node 0's
  // mcirun, once every node has finished). Without it they go 10 s after
  // the last relay.
  void end_job();
  // Promises of other, lost relays this one kept.
  std::uint64_t kept_for_others() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mci
