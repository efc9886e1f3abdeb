#include "backends/cpu/cpu_settings.hpp"

#include <fmt/format.h>

#include "collectives/algorithm_table.hpp"
#include "common/env.hpp"
#include "mci/errors.hpp"

namespace mci {

namespace {

// A wait-policy setting in microseconds, 0 .. 1 s.
std::chrono::microseconds microseconds_setting(const char* name, std::chrono::microseconds fallback) {
  const long long v = env_int(name).value_or(fallback.count());
  if (v < 0 || v > 1'000'000) {
    throw ConfigError(fmt::format("{}={} is out of range: use 0 .. 1000000 (microseconds)", name, v));
  }
  return std::chrono::microseconds(v);
}

const char* shm_mode_name(transport::ShmMode m) {
  switch (m) {
    case transport::ShmMode::required: return "shm";
    case transport::ShmMode::off: return "tcp";
    case transport::ShmMode::automatic: break;
  }
  return "auto";
}

}  // namespace

CpuSettings CpuSettings::from_env() {
  CpuSettings s;
  if (auto a = env_str("MCI_ALGO")) s.forced_algo = coll::parse_forced_algo(*a);
  if (auto t = env_str("MCI_TRANSPORT")) {
    if (*t == "shm") {
      s.shm_mode = transport::ShmMode::required;
    } else if (*t == "tcp") {
      s.shm_mode = transport::ShmMode::off;
    } else if (*t != "auto" && !t->empty()) {
      throw ConfigError(fmt::format("MCI_TRANSPORT='{}' is not a transport: use auto, shm or tcp", *t));
    }
  }
  const long long buffer = env_int("MCI_SHM_BUFFER_BYTES").value_or(static_cast<long long>(s.shm_buffer_bytes));
  if (buffer < 4096 || buffer > (1ll << 30)) {
    throw ConfigError(fmt::format("MCI_SHM_BUFFER_BYTES={} is out of range: use 4096 .. 1 GiB", buffer));
  }
  s.shm_buffer_bytes = static_cast<std::size_t>(buffer);
  if (auto how = env_str("MCI_SHM_STREAMING")) {
    // A rank's own choice: readers do not care how the bytes were written.
    if (*how == "always") {
      s.shm_copies = coll::SharedCopier::Mode::streaming;
    } else if (*how == "never") {
      s.shm_copies = coll::SharedCopier::Mode::plain;
    } else if (*how != "auto" && !how->empty()) {
      throw ConfigError(fmt::format("MCI_SHM_STREAMING='{}': use auto, always or never", *how));
    }
  }
  s.shm_wait.spin = microseconds_setting("MCI_SHM_SPIN_US", s.shm_wait.spin);
  s.shm_wait.yield = microseconds_setting("MCI_SHM_YIELD_US", s.shm_wait.yield);
  s.tcp_spin = microseconds_setting("MCI_TCP_SPIN_US", s.tcp_spin);
  s.tcp_yield = microseconds_setting("MCI_TCP_YIELD_US", s.tcp_yield);
  if (auto c = env_str("MCI_CONNECT")) {
    if (*c == "eager") {
      s.connect = transport::ConnectMode::eager;
    } else if (*c != "lazy" && !c->empty()) {
      throw ConfigError(
          fmt::format("MCI_CONNECT='{}' is not a connection mode: use lazy (connect to a peer when an "
                      "algorithm first needs it, the default) or eager (connect every pair at init)",
                      *c));
    }
  }
  s.host_id = env_str("MCI_HOST_ID").value_or("");
  // Ranks publish their host as a line of text (shm_connect.cpp).
  if (s.host_id.find('\n') != std::string::npos) {
    throw ConfigError("MCI_HOST_ID holds a line break: use a name on one line");
  }
  return s;
}

std::string CpuSettings::shared_part() const {
  return fmt::format("MCI_ALGO={} MCI_TRANSPORT={} MCI_SHM_BUFFER_BYTES={} MCI_CONNECT={}",
                     forced_algo ? algo_name(*forced_algo) : "auto", shm_mode_name(shm_mode), shm_buffer_bytes,
                     connect == transport::ConnectMode::eager ? "eager" : "lazy");
}

}  // namespace mci
