// The cpu backend's settings and the notices for settings a backend ignores,
// read from fed sources: no environment involved.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_settings.hpp"
#include "backends/registry.hpp"
#include "common/env_lookup.hpp"
#include "mci/errors.hpp"

namespace mci {
namespace {

TEST(CpuSettings, ReadsEveryValueFromTheSource) {
  const SettingSource s({{"MCI_ALGO", "rd"}, {"MCI_TCP_SPIN_US", "0"}}, fixed_env({{"MCI_TRANSPORT", "tcp"},
                                                                                   {"MCI_SHM_STREAMING", "never"},
                                                                                   {"MCI_CONNECT", "eager"},
                                                                                   {"MCI_SHM_BUFFER_BYTES", "65536"},
                                                                                   {"MCI_HOST_ID", "node7"}}));
  const CpuSettings c = CpuSettings::from(s);
  ASSERT_TRUE(c.forced_algo);
  EXPECT_EQ(*c.forced_algo, Algo::recursive_doubling);
  EXPECT_EQ(c.shm_mode, transport::ShmMode::off);
  EXPECT_EQ(c.shm_copies, coll::SharedCopier::Mode::plain);
  EXPECT_EQ(c.connect, transport::ConnectMode::eager);
  EXPECT_EQ(c.shm_buffer_bytes, 65536u);
  EXPECT_EQ(c.tcp_spin.count(), 0);
  EXPECT_EQ(c.tcp_yield.count(), 200);
  EXPECT_EQ(c.host_id, "node7");
  EXPECT_EQ(c.agreed, "MCI_ALGO=rd MCI_TRANSPORT=tcp MCI_SHM_BUFFER_BYTES=65536 MCI_CONNECT=eager");

  const CpuSettings d = CpuSettings::from(SettingSource({}, fixed_env({})));
  EXPECT_FALSE(d.forced_algo);
  EXPECT_EQ(d.shm_mode, transport::ShmMode::automatic);
  EXPECT_EQ(d.connect, transport::ConnectMode::lazy);
}

TEST(CpuSettings, AnUnknownAlgorithmListsTheChoices) {
  try {
    (void)CpuSettings::from(SettingSource({{"MCI_ALGO", "fastest"}}, fixed_env({})));
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fastest"), std::string::npos) << m;
    EXPECT_NE(m.find("ring"), std::string::npos) << m;
  }
}

TEST(BackendTable, SaysOnceWhichSettingsABackendIgnores) {
  const BackendEntry* gloo = find_backend("gloo");
  const BackendEntry* cpu = find_backend("cpu");
  ASSERT_TRUE(gloo && cpu);
  EXPECT_EQ(ignored_setting(*gloo, setting("MCI_ALGO"), "ring"),
            "MCI_ALGO=ring is ignored on the gloo backend, which picks its own algorithms: MCI_ALGO applies to the "
            "backends that run mci's algorithms: cpu (MCI_BACKEND=cpu)");
  EXPECT_EQ(ignored_setting(*gloo, setting("MCI_SHM_SPIN_US"), "0"),
            "MCI_SHM_SPIN_US=0 is ignored on the gloo backend, which has its own transport: MCI_SHM_SPIN_US applies "
            "to the backends that run on mci's transports: cpu (MCI_BACKEND=cpu)");
  EXPECT_FALSE(ignored_setting(*cpu, setting("MCI_ALGO"), "ring"));
  EXPECT_FALSE(ignored_setting(*gloo, setting("MCI_CLOCK"), "steady"));  // the group's, every backend's
}

}  // namespace
}  // namespace mci
