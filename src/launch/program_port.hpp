// MASTER_PORT for the program. mcirun's store holds --master_port (the
// launchers' rendezvous, as torchrun's does), so the program gets a port of
// its own: node 0's mcirun asks the OS for a free one and publishes it in
// its store, the other nodes' launchers read it there before their ranks
// start. A program that hosts a store of its own on MASTER_PORT (torch's
// TCPStore on rank 0) then finds it free.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "launch/signals.hpp"

namespace mci::launch {

struct ProgramPortOptions {
  std::string store_host;
  int store_port = 0;
  std::string token;
  // How long a node waits for node 0 (torchrun's join timeout).
  std::chrono::milliseconds wait_limit{std::chrono::minutes(10)};
};

// Node 0: picks a free port and publishes it; returns it.
int publish_program_port(const ProgramPortOptions& o);

// Other nodes: waits for node 0's port. nullopt when a stop signal (SIGINT,
// SIGTERM, SIGHUP) arrived meanwhile; *stop_signal is set to it. Throws
// mci::Error when node 0 never published it within wait_limit, or refused us.
std::optional<int> fetch_program_port(const ProgramPortOptions& o, SignalFd& signals, int* stop_signal);

inline constexpr const char* kProgramPortKey = "mcirun/program_port";

}  // namespace mci::launch
