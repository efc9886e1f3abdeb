// The backend table: what init, the messages and list_backends() read.
#include <gtest/gtest.h>

#include <string>

#include "backends/registry.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"

namespace mci {
namespace {

TEST(BackendTable, KnowsEveryBackendAndWhichAreBuilt) {
  const auto all = list_backends();
  ASSERT_EQ(all.size(), backend_table().size());
  EXPECT_EQ(all[0].name, "cpu");
  EXPECT_TRUE(all[0].built);
  for (const auto& b : all) {
    const BackendEntry* e = find_backend(b.name);
    ASSERT_NE(e, nullptr) << b.name;
    EXPECT_EQ(e->built, backend_available(b.name));
    EXPECT_EQ(e->built, e->make != nullptr) << b.name;
    EXPECT_FALSE(b.description.empty());
  }
  EXPECT_FALSE(backend_available("mpi-someday"));
}

TEST(BackendTable, UnknownAndUnbuiltBackendsGetMessagesFromTheTable) {
  try {
    make_backend("fast", BackendContext{});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown backend 'fast': use cpu ("), std::string::npos) << m;
    for (const auto& b : backend_table()) EXPECT_NE(m.find(std::string(b.name) + " ("), std::string::npos) << m;
  }
  for (const auto& b : backend_table()) {
    if (b.built) continue;
    try {
      make_backend(b.name, BackendContext{});
      ADD_FAILURE() << b.name;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("is not part of this build of mci"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(b.needs)), std::string::npos) << e.what();
    }
  }
}

TEST(BackendTable, InitRefusesAnUnknownBackendBeforeConnecting) {
  InitOptions o;
  o.backend = "fast";
  o.init_method = "tcp://127.0.0.1:1";  // never reached
  o.rank = 0;
  o.world_size = 1;
  try {
    init_process_group(o);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'fast'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mci
