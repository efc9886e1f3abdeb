// The cpu backend's settings, read once through the group's setting source
// (the program's values, then the environment), checked by their rows of
// the settings table, and passed down: the transports and algorithms below
// never read a variable.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "collectives/kernels/copy.hpp"
#include "common/algo.hpp"
#include "common/setting_source.hpp"
#include "transport/connect_mode.hpp"
#include "transport/shm/shm_connect.hpp"

namespace mci {

struct CpuSettings {
  std::optional<Algo> forced_algo;                              // MCI_ALGO (nullopt: auto)
  transport::ShmMode shm_mode = transport::ShmMode::automatic;  // MCI_TRANSPORT
  // Per-rank shared-memory staging: 4 buffers of this size (two staging, two
  // result), whatever the message size.
  std::size_t shm_buffer_bytes = transport::ShmOptions{}.buffer_bytes;       // MCI_SHM_BUFFER_BYTES
  coll::SharedCopier::Mode shm_copies = coll::SharedCopier::Mode::adaptive;  // MCI_SHM_STREAMING
  transport::ShmWait shm_wait;                                               // MCI_SHM_SPIN_US, MCI_SHM_YIELD_US
  std::chrono::microseconds tcp_spin{50};                                    // MCI_TCP_SPIN_US
  std::chrono::microseconds tcp_yield{200};                                  // MCI_TCP_YIELD_US
  transport::ConnectMode connect = transport::ConnectMode::lazy;             // MCI_CONNECT
  std::string host_id;  // MCI_HOST_ID: pretend hosts on one machine (empty: the machine's identity)

  // The settings every rank must share (they decide algorithms and
  // layouts), as "NAME=value ..." to compare.
  std::string agreed;

  // Throws ConfigError naming the variable, its value and what it accepts.
  static CpuSettings from(const SettingSource& source);
};

}  // namespace mci
