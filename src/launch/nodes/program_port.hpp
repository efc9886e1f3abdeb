// MASTER_ADDR and MASTER_PORT for the program. mcirun's store holds
// --master_port (the launchers' rendezvous, as torchrun's does), so the
// program gets a port of its own: node 0's mcirun reserves a free one and
// publishes it (with the address to reach it: --local-addr, else
// --master_addr) in its store; the other nodes' launchers read them there
// before their ranks start. A program that hosts a store of its own on
// MASTER_PORT (torch's TCPStore on rank 0) then binds it.
//
// The port stays reserved for the job: a socket bound to it, with
// SO_REUSEADDR and never listening, which the OS counts as taken when it
// picks a free port for anyone else (bind to port 0, a connection's local
// port), while a server that sets SO_REUSEADDR itself (torch's TCPStore
// on torch 1.13 and 2.x, libuv, gRPC, Python's socket.create_server) can
// still bind and listen on it. Picking a port and closing it before rank 0
// binds it (torchrun's way) leaves a window in which another job picks the
// same port; two jobs' ranks then meet in one store.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "common/socket.hpp"
#include "launch/ranks/signals.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"

namespace mci::launch {

// A free TCP port held for as long as this object lives (see above).
class PortReservation {
 public:
  PortReservation();  // throws mci::Error when no socket can be bound
  int port() const { return port_; }

 private:
  Fd fd_;
  int port_ = 0;
};

struct ProgramPortOptions {
  StoreAddress store;  // node 0's
  // How long a node waits for node 0 (torchrun's join timeout; --rdzv_conf
  // join_timeout=SECONDS).
  std::chrono::milliseconds wait_limit{std::chrono::minutes(10)};
  // Appended to the keys: "" for the job, "/attempt/N" for an elastic
  // attempt on etcd, whose GROUP_RANK 0 may be another node each time.
  std::string scope;
  // Asked while waiting: why the node that publishes is gone, or nullopt
  // (unset: never asked). Its answer ends the wait (ProgramOwnerLost).
  std::function<std::optional<std::string>()> owner_gone;
};

// The node that was to publish the endpoint is gone.
struct ProgramOwnerLost : Error {
  using Error::Error;
};

struct ProgramEndpoint {
  std::string addr;
  int port = 0;
  // Node 0's --on-rank-loss ("stop" or "continue"), published with the
  // endpoint: every node must answer a loss the same way, and this is the
  // one thing every node reads from node 0 before its ranks start.
  std::string on_rank_loss = "stop";
};

// Node 0: publishes where the program's rank 0 listens.
void publish_program_endpoint(const ProgramPortOptions& o, const ProgramEndpoint& e);

// Other nodes: waits for node 0's endpoint. nullopt when a stop signal
// arrived meanwhile; *stop_signal is set to it. Throws mci::Error when node
// 0 never published it within wait_limit, or refused us.
std::optional<ProgramEndpoint> fetch_program_endpoint(const ProgramPortOptions& o, SignalFd& signals, int* stop_signal);

inline constexpr const char* kProgramPortKey = "mcirun/program_port";
inline constexpr const char* kProgramAddrKey = "mcirun/program_addr";
inline constexpr const char* kOnRankLossKey = "mcirun/on_rank_loss";

}  // namespace mci::launch
