// A node's mcirun, as long as it lives, in the job's store: one connection
// held open, whose close the store itself records (append_on_close; on
// etcd, another node's relay when this node's relay went with its node).
// An attempt's own links (launch/nodes/node_link.hpp) close between
// attempts, so only this tells a live node from one whose mcirun is gone:
// a restart fails at once without it (join_attempt), and on etcd the next
// node serves the monitor's page when node 0 is gone (jobview/job_monitor).
#pragma once

#include <memory>
#include <string>

#include "mci/store.hpp"

namespace mci {

class NodePresence {
 public:
  // Throws as StoreAddress::connect does.
  NodePresence(const StoreAddress& store, int node_rank);
  ~NodePresence();
  NodePresence(const NodePresence&) = delete;
  NodePresence& operator=(const NodePresence&) = delete;

 private:
  std::unique_ptr<TcpStore> conn_;
};

// A connection the store counts: `closed_key` gains a byte when it ends
// (armed first: a close between the two reads as closed, never as a
// connection counted and never closed), `opened_key` counts it. Shared by
// NodePresence and the attempt's NodeLink, which count theirs the same way.
void count_connection(Store& conn, const std::string& opened_key, const std::string& closed_key);
// Whether every connection counted under these keys has closed; false while
// none ever closed (a node that never said it was there).
bool all_closed(Store& store, const std::string& opened_key, const std::string& closed_key);

// Whether node `node`'s mcirun is gone (every NodePresence connection of it
// closed); false for a node that never said it was there.
bool node_is_gone(Store& store, int node);

}  // namespace mci
