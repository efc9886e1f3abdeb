#include "store/node_presence.hpp"

#include <chrono>
#include <cstdint>

#include "store/keys.hpp"

namespace mci {

NodePresence::NodePresence(const StoreAddress& store, int node_rank)
    : conn_(store.connect(std::chrono::seconds(5), std::chrono::seconds(30))) {
  // The certificate first: a close between the two reads as gone (closed 1,
  // opened 0) rather than as a node never there.
  conn_->append_on_close(keys::present_gone(node_rank), to_bytes("x"));
  conn_->add(keys::present(node_rank), 1);
}

NodePresence::~NodePresence() = default;

bool node_is_gone(Store& store, int node) {
  // An append of nothing reads the value without waiting for it.
  const auto closed = static_cast<std::int64_t>(store.append(keys::present_gone(node), {}).size());
  return closed > 0 && closed >= store.add(keys::present(node), 0);
}

}  // namespace mci
