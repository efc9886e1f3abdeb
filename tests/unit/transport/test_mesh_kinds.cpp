// The mesh kinds are rows that own their MCI_TRANSPORT value: the choices
// a program may give, the message for a bad one and mci-perf's --transport
// come from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/env_lookup.hpp"
#include "common/settings.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "mci/store.hpp"
#include "support/thread_ranks.hpp"
#include "transport/mesh.hpp"

namespace mci::transport {
namespace {

Settings with_transport(const std::string& value) {
  return Settings::resolve(SettingSource({{"MCI_TRANSPORT", value}}, fixed_env({})), SettingUses{true, true},
                           transport_choices());
}

TEST(MeshKinds, EachKindIsAnMciTransportChoiceAfterAutoAndShm) {
  ASSERT_FALSE(mesh_kinds().empty());
  EXPECT_EQ(default_mesh_kind(), mesh_kinds().front().selector.name);
  EXPECT_EQ(choices_text(setting("MCI_TRANSPORT"), false, transport_choices()), "auto, shm or tcp");
  for (const auto& k : mesh_kinds()) {
    EXPECT_EQ(with_transport(std::string(k.selector.name)).choice("MCI_TRANSPORT"), k.selector.name);
  }
  try {
    (void)with_transport("udp");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "MCI_TRANSPORT='udp' is not a transport: use auto (shared memory where ranks share a host, TCP "
                 "between hosts), shm (require shared memory) or tcp (never use shared memory)");
  }
}

TEST(MeshKinds, ThePublicListOfSettingsOffersTheKinds) {
  const auto settings = list_settings();
  const auto row =
      std::find_if(settings.begin(), settings.end(), [](const auto& s) { return s.name == "MCI_TRANSPORT"; });
  ASSERT_NE(row, settings.end());
  EXPECT_EQ(row->accepts, "auto, shm or tcp");
  std::vector<std::string> expected{"auto", "shm"};
  for (const auto& k : mesh_kinds()) expected.emplace_back(k.selector.name);
  EXPECT_EQ(row->choices, expected);
}

TEST(MeshKinds, EveryKindConnectsTheRanksOfAGroupWithTheGroupsSettings) {
  const Settings s = Settings::resolve(SettingSource({{"MCI_CONNECT", "eager"}}, fixed_env({})),
                                       SettingUses{true, true}, transport_choices());
  for (const auto& k : mesh_kinds()) {
    SCOPED_TRACE(std::string(k.selector.name));
    StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
    const std::vector<std::string> errors = test::run_threads(2, [&](int r) {
      TcpStoreOptions o;
      o.port = server.port();
      TcpStore store(o);
      Mesh m = connect_mesh(k.selector.name, store, MeshOptions{r, 2, "127.0.0.1", "kinds", "", true, s},
                            Deadline(std::chrono::seconds(10)));
      ASSERT_TRUE(m.transport);
      EXPECT_EQ(m.transport->rank(), r);
      EXPECT_EQ(m.transport->size(), 2);
      m.transport->close();
    });
    for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

TEST(MeshKinds, AnUnknownKindIsAConfigErrorNamingTheKinds) {
  const Settings s = with_transport("auto");
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  TcpStoreOptions o;
  o.port = server.port();
  TcpStore store(o);
  try {
    (void)connect_mesh("udp", store, MeshOptions{0, 1, "127.0.0.1", "s", "", true, s},
                       Deadline(std::chrono::seconds(1)));
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "unknown transport 'udp': use tcp");
  }
}

}  // namespace
}  // namespace mci::transport
