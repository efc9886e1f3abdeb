#include "backends/cpu/cpu_settings.hpp"

#include "collectives/algorithm_table.hpp"

namespace mci {

CpuSettings CpuSettings::from(const SettingSource& source) {
  CpuSettings s;
  s.forced_algo = coll::parse_forced_algo(source.text("MCI_ALGO"));
  const std::string transport = source.choice("MCI_TRANSPORT");
  s.shm_mode = transport == "shm"   ? transport::ShmMode::required
               : transport == "tcp" ? transport::ShmMode::off
                                    : transport::ShmMode::automatic;
  s.shm_buffer_bytes = static_cast<std::size_t>(source.integer("MCI_SHM_BUFFER_BYTES"));
  // A rank's own choice: readers do not care how the bytes were written.
  const std::string copies = source.choice("MCI_SHM_STREAMING");
  s.shm_copies = copies == "always"  ? coll::SharedCopier::Mode::streaming
                 : copies == "never" ? coll::SharedCopier::Mode::plain
                                     : coll::SharedCopier::Mode::adaptive;
  s.shm_wait.spin = std::chrono::microseconds(source.integer("MCI_SHM_SPIN_US"));
  s.shm_wait.yield = std::chrono::microseconds(source.integer("MCI_SHM_YIELD_US"));
  s.tcp_spin = std::chrono::microseconds(source.integer("MCI_TCP_SPIN_US"));
  s.tcp_yield = std::chrono::microseconds(source.integer("MCI_TCP_YIELD_US"));
  s.connect = source.choice("MCI_CONNECT") == "eager" ? transport::ConnectMode::eager : transport::ConnectMode::lazy;
  s.host_id = source.text("MCI_HOST_ID");
  s.agreed = source.agreed_part(true, true);
  return s;
}

}  // namespace mci
