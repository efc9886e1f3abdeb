#include "store/node_presence.hpp"

#include <chrono>
#include <cstdint>

#include "store/keys.hpp"

namespace mci {

NodePresence::NodePresence(const StoreAddress& store, int node_rank)
    : conn_(store.connect(std::chrono::seconds(5), std::chrono::seconds(30))) {
  count_connection(*conn_, keys::present(node_rank), keys::present_gone(node_rank));
}

NodePresence::~NodePresence() = default;

void count_connection(Store& conn, const std::string& opened_key, const std::string& closed_key) {
  conn.append_on_close(closed_key, to_bytes("x"));
  conn.add(opened_key, 1);
}

bool all_closed(Store& store, const std::string& opened_key, const std::string& closed_key) {
  // An append of nothing reads the value without waiting for it.
  const auto closed = static_cast<std::int64_t>(store.append(closed_key, {}).size());
  return closed > 0 && closed >= store.add(opened_key, 0);
}

bool node_is_gone(Store& store, int node) { return all_closed(store, keys::present(node), keys::present_gone(node)); }

}  // namespace mci
