// The notices for settings a backend ignores, from the backend table.
#include <gtest/gtest.h>

#include "backends/registry.hpp"

namespace mci {
namespace {

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
