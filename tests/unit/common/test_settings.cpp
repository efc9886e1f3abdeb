// The settings table and the source every reader takes its values from.
#include <gtest/gtest.h>

#include <string>

#include "common/env.hpp"
#include "common/setting_source.hpp"
#include "common/settings.hpp"
#include "common/settings_table.hpp"
#include "mci/errors.hpp"

namespace mci {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

SettingSource env_only(std::map<std::string, std::string> vars) {
  return SettingSource({}, fixed_env(std::move(vars)));
}

Settings resolve_all(std::map<std::string, std::string> vars, std::span<const FieldDefault> fields = {}) {
  return Settings::resolve(env_only(std::move(vars)), SettingUses{true, true}, {}, fields);
}

TEST(SettingsTable, EveryDefaultPassesItsOwnRow) {
  const Settings unset = resolve_all({});
  for (std::size_t i = 0; i < kSettingRows.size(); ++i) {
    const SettingRow& r = kSettingRows[i];
    SCOPED_TRACE(std::string(r.name));
    EXPECT_TRUE(r.name.starts_with("MCI_"));
    EXPECT_EQ(find_setting(r.name), &r);
    switch (r.kind) {
      case SettingKind::integer:
        EXPECT_LE(r.min, r.max);
        EXPECT_FALSE(r.unit.empty());
        break;
      case SettingKind::choice:
        EXPECT_FALSE(r.choices.empty());
        EXPECT_FALSE(r.noun.empty());
        break;
      case SettingKind::text:
      case SettingKind::flag: break;
    }
    if (r.section == SettingSection::tuning) {
      EXPECT_FALSE(r.doc.empty());
    }
    if (r.ranks_agree) {
      EXPECT_EQ(r.scope, SettingScope::job);
    }
  }
  // The group's rows resolve to their defaults (text as given, a flag unset).
  EXPECT_EQ(unset.integer("MCI_SHM_BUFFER_BYTES"), 524288);
  EXPECT_EQ(unset.integer("MCI_FLIGHT_RECORDER_ENTRIES"), 2048);
  EXPECT_EQ(unset.choice("MCI_CLOCK"), "auto");
  EXPECT_EQ(unset.choice("MCI_FR_DUMP_ON_SIGNAL"), "off");
  EXPECT_EQ(unset.text("MCI_HOST_ADDR"), "");
  EXPECT_FALSE(unset.flag("MCI_STORE_HOSTED"));
  EXPECT_EQ(find_setting("MCI_NOT_A_SETTING"), nullptr);
}

TEST(SettingSource, GivenValuesWinOverTheEnvironmentWhichWinsOverTheDefault) {
  const SettingSource s({{"MCI_CONNECT", "lazy"}}, fixed_env({{"MCI_CONNECT", "eager"}, {"MCI_ALGO", "ring"}}));
  EXPECT_EQ(*s.raw("MCI_CONNECT"), "lazy");
  EXPECT_EQ(*s.raw("MCI_ALGO"), "ring");
  EXPECT_FALSE(s.raw("MCI_TRANSPORT"));
  EXPECT_FALSE(s.chosen("MCI_CONNECT"));  // the default, even given
  EXPECT_TRUE(s.chosen("MCI_ALGO"));
  // An empty value is the default, as an unset one.
  EXPECT_EQ(resolve_all({{"MCI_CONNECT", ""}}).choice("MCI_CONNECT"), "lazy");
  EXPECT_FALSE(env_only({{"MCI_TRANSPORT", ""}}).chosen("MCI_TRANSPORT"));
}

TEST(SettingSource, RefusesNamesThatAreNotSettingsAndThoseReadOnlyFromTheEnvironment) {
  const std::string unknown = error_of([] { SettingSource({{"MCI_ALOG", "ring"}}, fixed_env({})); });
  EXPECT_NE(unknown.find("'MCI_ALOG' is not one of mci's settings"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("MCI_ALGO"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find("MCI_LOG_LEVEL"), std::string::npos) << unknown;
  const std::string log = error_of([] { SettingSource({{"MCI_LOG_LEVEL", "debug"}}, fixed_env({})); });
  EXPECT_NE(log.find("MCI_LOG_LEVEL is read from the environment"), std::string::npos) << log;
}

TEST(Settings, ReadsEachRowAsItsKindOnceResolved) {
  const Settings s = Settings::resolve(SettingSource({{"MCI_TCP_SPIN_US", "0"}}, fixed_env({{"MCI_TCP_SPIN_US", "7"},
                                                                                            {"MCI_CONNECT", "eager"},
                                                                                            {"MCI_HOST_ID", "a"},
                                                                                            {"MCI_STORE_HOSTED", ""}})),
                                       SettingUses{true, true});
  EXPECT_EQ(s.integer("MCI_TCP_SPIN_US"), 0);  // given wins over the environment
  EXPECT_EQ(s.integer("MCI_TCP_YIELD_US"), 200);
  EXPECT_EQ(s.choice("MCI_CONNECT"), "eager");
  EXPECT_EQ(s.choice("MCI_TRANSPORT"), "auto");
  EXPECT_EQ(s.text("MCI_HOST_ID"), "a");
  EXPECT_EQ(s.text("MCI_ALGO"), "auto");
  EXPECT_TRUE(s.flag("MCI_STORE_HOSTED"));  // set, even empty
}

TEST(Settings, BadValuesAreRefusedWithTheirRowsMessage) {
  EXPECT_EQ(error_of([] {
              resolve_all({{"MCI_TCP_SPIN_US", "2000000"}});
            }),
            "MCI_TCP_SPIN_US=2000000 is out of range: use 0 .. 1000000 (microseconds)");
  EXPECT_EQ(error_of([] {
              resolve_all({{"MCI_HANG_REPORT_WAIT_MS", "3s"}});
            }),
            "MCI_HANG_REPORT_WAIT_MS='3s' is not an integer: set it to a whole number, or unset it");
  EXPECT_EQ(error_of([] {
              resolve_all({{"MCI_CONNECT", "sometimes"}});
            }),
            "MCI_CONNECT='sometimes' is not a connection mode: use lazy (connect to a peer when an algorithm first "
            "needs it, the default) or eager (connect every pair at init)");
  EXPECT_EQ(error_of([] {
              resolve_all({{"MCI_HOST_ID", "a\nb"}});
            }),
            "MCI_HOST_ID holds a line break: use a value on one line");
}

TEST(Settings, ResolvesOnlyTheRowsItsBackendHonours) {
  // A backend with its own transports ignores MCI_SHM_SPIN_US: a bad value
  // cannot fail its group (init says it is ignored instead).
  const Settings s = Settings::resolve(env_only({{"MCI_SHM_SPIN_US", "soon"}, {"MCI_ALGO", "ring"}}), SettingUses{});
  EXPECT_EQ(s.integer("MCI_HANG_REPORT_WAIT_MS"), 3000);
  EXPECT_EQ(s.agreed(), "");
  EXPECT_THROW((void)s.integer("MCI_SHM_SPIN_US"), std::logic_error);
  EXPECT_THROW((void)s.text("MCI_ALGO"), std::logic_error);
}

TEST(Settings, MoreChoicesFromALayerAboveAreAcceptedAndListed) {
  static constexpr SettingChoice kKinds[] = {{"tcp", "never use shared memory"}, {"rdma", "verbs between hosts"}};
  const MoreChoices more[] = {{"MCI_TRANSPORT", kKinds}};
  EXPECT_EQ(Settings::resolve(env_only({{"MCI_TRANSPORT", "rdma"}}), SettingUses{true, true}, more)
                .choice("MCI_TRANSPORT"),
            "rdma");
  const std::string bad = error_of([&] {
    (void)Settings::resolve(env_only({{"MCI_TRANSPORT", "udp"}}), SettingUses{true, true}, more);
  });
  EXPECT_NE(bad.find("MCI_TRANSPORT='udp' is not a transport: use auto ("), std::string::npos) << bad;
  EXPECT_NE(bad.find(", tcp (never use shared memory) or rdma (verbs between hosts)"), std::string::npos) << bad;
}

TEST(Settings, ATypedInitOptionsFieldIsTheDefaultCheckedByTheRowAlone) {
  const FieldDefault field[] = {{"MCI_FLIGHT_RECORDER_ENTRIES", "InitOptions::flight_recorder_entries", 64}};
  EXPECT_EQ(resolve_all({}, field).integer("MCI_FLIGHT_RECORDER_ENTRIES"), 64);
  // The variable, set or given, still wins over the field.
  EXPECT_EQ(resolve_all({{"MCI_FLIGHT_RECORDER_ENTRIES", "8"}}, field).integer("MCI_FLIGHT_RECORDER_ENTRIES"), 8);
  const FieldDefault huge[] = {{"MCI_FLIGHT_RECORDER_ENTRIES", "InitOptions::flight_recorder_entries", 1ull << 40}};
  EXPECT_EQ(error_of([&] { resolve_all({}, huge); }),
            "InitOptions::flight_recorder_entries=1099511627776 is out of range: use 0 .. 16777216 (operations; 0: "
            "off)");
  const FieldDefault wrapped[] = {{"MCI_FLIGHT_RECORDER_ENTRIES", "InitOptions::flight_recorder_entries", ~0ull}};
  EXPECT_NE(error_of([&] { resolve_all({}, wrapped); }).find("=18446744073709551615 is out of range"),
            std::string::npos);
}

TEST(Settings, TheAgreedPartHoldsTheHonouredRowsReadAsTheirKind) {
  const Settings s = resolve_all({{"MCI_SHM_BUFFER_BYTES", " 8192"}, {"MCI_ALGO", "ring"}});
  EXPECT_EQ(s.agreed(),
            "MCI_ALGO=ring MCI_REPRODUCIBLE=0 MCI_TRANSPORT=auto MCI_SHM_BUFFER_BYTES=8192 MCI_CONNECT=lazy");
  EXPECT_EQ(Settings::resolve(env_only({{"MCI_SHM_BUFFER_BYTES", "8192"}}), SettingUses{false, true}).agreed(),
            "MCI_TRANSPORT=auto MCI_SHM_BUFFER_BYTES=8192 MCI_CONNECT=lazy");
  EXPECT_EQ(Settings::agreed_names(SettingUses{true, true}),
            "MCI_ALGO, MCI_REPRODUCIBLE, MCI_TRANSPORT, MCI_SHM_BUFFER_BYTES and MCI_CONNECT");
}

TEST(SettingsTable, MarkdownHasOneLinePerRowOfTheSection) {
  const std::string md = settings_markdown(SettingSection::tuning);
  std::size_t rows = 0;
  for (const auto& r : setting_rows()) {
    if (r.section != SettingSection::tuning) continue;
    ++rows;
    EXPECT_NE(md.find("| `" + std::string(r.name) + "` |"), std::string::npos) << r.name;
  }
  EXPECT_EQ(static_cast<std::size_t>(std::count(md.begin(), md.end(), '\n')), rows + 2);
}

}  // namespace
}  // namespace mci
