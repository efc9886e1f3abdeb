// The store keys mci's processes agree under, named once, with what each
// holds (store/records.hpp for the records; counters and flags hold decimal
// text).
#pragma once

#include <string>
#include <string_view>

namespace mci::keys {

// --- a group's keys, under its session's prefix (group/join.hpp) ------------

// records::RankClaim of the process that holds rank r.
inline std::string rank_claim(int r) { return "rank/" + std::to_string(r); }
// The job's world size, as the first rank stated it (decimal).
inline constexpr const char* kWorldSize = "world_size";
// records::encode_gone of each rank whose process's connection ended; the
// store appends them itself.
inline constexpr const char* kGone = "gone";
// A shrink's attempt, a DecideOnce (store/decide_once.hpp) under
// shrink/N: "arrived" (records::Arrivals), "count", "decision"
// (records::Member list, written once); and "group" (the new group's
// prefix).
inline std::string shrink(int attempt) { return "shrink/" + std::to_string(attempt); }
inline std::string shrink(int attempt, std::string_view name) { return shrink(attempt) + "/" + std::string(name); }
// A grow, a DecideOnce under grow: "arrived" (records::Joiner list of the
// processes waiting to join this session), "count", "decision"
// (records::GrowDecision, written once by rank 0); and "group".
inline constexpr const char* kGrow = "grow";
inline constexpr const char* kGrowGroup = "grow/group";
// Under a lineage (one per group name and start): the session that runs now.
inline std::string current_session(std::string_view lineage) { return std::string(lineage) + "/current"; }

// --- mcirun's keys, on node 0's store -------------------------------------

// An attempt's key: mcirun/NAME for the first (as before restarts
// existed), then mcirun/attempt/N/NAME. Under it: "failed"
// (records::NodeNews, written once), "seen/NODE" and "done/NODE" (flags),
// "joined" (a counter) and "go" (a flag).
inline std::string attempt(int attempt, std::string_view name) {
  return (attempt == 0 ? std::string("mcirun/") : "mcirun/attempt/" + std::to_string(attempt) + "/") +
         std::string(name);
}

// A node's mcirun for the whole job (launch/nodes/node_link.hpp,
// NodePresence): "present/NODE" counts its connections, "present/NODE/gone"
// gets a byte from the store when one closes (append_on_close).
inline std::string present(int node) { return "mcirun/present/" + std::to_string(node); }
inline std::string present_gone(int node) { return present(node) + "/gone"; }

// The elastic rendezvous (launch/nodes/elastic_rendezvous.hpp says who writes what).
namespace elastic {
inline constexpr const char* kNextId = "mcirun/elastic/next_id";
inline constexpr const char* kOpen = "mcirun/elastic/open";
inline constexpr const char* kClosed = "mcirun/elastic/closed";
// records::NodeCard of node `id`'s mcirun.
inline std::string node(int id) { return "mcirun/elastic/node/" + std::to_string(id); }
// An attempt's round, a DecideOnce: "arrived" (a records::NodeSlot per
// node that signs up), "count", "decision" (records::NodeSlot list, in
// GROUP_RANK order, written by node 0).
inline std::string round(int attempt) { return "mcirun/elastic/round/" + std::to_string(attempt); }
inline std::string beat(int id) { return "mcirun/elastic/beat/" + std::to_string(id); }
inline std::string left(int id) { return "mcirun/elastic/left/" + std::to_string(id); }
// Node `id`'s rendezvous connection, counted (store/node_presence.hpp's
// count_connection): the store records its close, so a killed mcirun is
// lost at once, not after its beats' silence.
inline std::string present(int id) { return "mcirun/elastic/present/" + std::to_string(id); }
inline std::string present_gone(int id) { return "mcirun/elastic/present_gone/" + std::to_string(id); }
}  // namespace elastic

// mcirun --monitor (jobview/job_monitor.cpp): each node's sample (JSON)
// and the count of dumps the page asked for.
namespace monitor {
inline std::string node(int node) { return "mcirun/monitor/node/" + std::to_string(node); }
inline constexpr const char* kDumps = "mcirun/monitor/dumps";
// On etcd, after node 0 is lost: the node that serves the page (its number).
inline constexpr const char* kServer = "mcirun/monitor/server";
}  // namespace monitor

}  // namespace mci::keys
