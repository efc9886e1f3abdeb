#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "../../support/ports.hpp"
#include "mci/mci.hpp"

namespace mci {
namespace {

using namespace std::chrono_literals;

struct EnvGuard {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string& k, const std::optional<std::string>& v) {
    const char* old = std::getenv(k.c_str());
    saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
    if (v) {
      ::setenv(k.c_str(), v->c_str(), 1);
    } else {
      ::unsetenv(k.c_str());
    }
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
};

std::string init_error(std::map<std::string, std::optional<std::string>> env, InitOptions o = {}) {
  EnvGuard g;
  for (const char* k :
       {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MCI_STORE_HOSTED"}) {
    g.set(k, std::nullopt);
  }
  for (auto& [k, v] : env) g.set(k, v);
  try {
    init_process_group(o);
  } catch (const ConfigError& e) {
    return std::string("ConfigError: ") + e.what();
  } catch (const TimeoutError& e) {
    return std::string("TimeoutError: ") + e.what();
  }
  return "no error";
}

TEST(InitEnv, EachMissingVariableIsNamedWithEnvMethod) {
  std::string m = init_error({});
  EXPECT_NE(m.find("environment variable RANK expected, but not set"), std::string::npos) << m;
  EXPECT_NE(m.find("env://"), std::string::npos) << m;
  m = init_error({{"RANK", "0"}});
  EXPECT_NE(m.find("environment variable WORLD_SIZE expected, but not set"), std::string::npos) << m;
  m = init_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("environment variable MASTER_ADDR expected, but not set"), std::string::npos) << m;
  m = init_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_NE(m.find("environment variable MASTER_PORT expected, but not set"), std::string::npos) << m;
}

TEST(InitEnv, BadValuesGetTheirOwnMessages) {
  std::map<std::string, std::optional<std::string>> base{{"RANK", "0"},
                                                         {"WORLD_SIZE", "2"},
                                                         {"MASTER_ADDR", "127.0.0.1"},
                                                         {"MASTER_PORT", "29999"}};
  auto with = [&](const char* k, const char* v) {
    auto e = base;
    e[k] = v;
    return init_error(e);
  };
  std::string m = with("RANK", "2");
  EXPECT_NE(m.find("RANK=2 is outside [0, WORLD_SIZE=2)"), std::string::npos) << m;
  m = with("RANK", "-1");
  EXPECT_NE(m.find("RANK=-1 is outside"), std::string::npos) << m;
  m = with("RANK", "zero");
  EXPECT_NE(m.find("RANK is 'zero', which is not an integer"), std::string::npos) << m;
  m = with("WORLD_SIZE", "0");
  EXPECT_NE(m.find("WORLD_SIZE=0 is not a valid number of processes"), std::string::npos) << m;
  m = with("MASTER_PORT", "70000");
  EXPECT_NE(m.find("MASTER_PORT=70000 is not a TCP port"), std::string::npos) << m;
  m = with("MASTER_PORT", "http");
  EXPECT_NE(m.find("MASTER_PORT is 'http'"), std::string::npos) << m;
}

TEST(InitEnv, UnreachableStoreTimesOutNamingTheAddress) {
  const int port = test::free_port();
  InitOptions o;
  o.timeout = 400ms;
  std::string m = init_error({{"RANK", "1"},
                              {"WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(port)}},
                             o);
  EXPECT_NE(m.find("TimeoutError: Timed out waiting 400ms to connect to the store at 127.0.0.1:" +
                   std::to_string(port)),
            std::string::npos)
      << m;
}

TEST(InitOptionsCheck, UnknownOrMissingBackendAndBadMethods) {
  InitOptions o;
  o.backend = "ucc";
  EXPECT_NE(init_error({}, o).find("unknown backend 'ucc': use cpu ("), std::string::npos);
  o.backend = "cpu";
  o.init_method = "file:///tmp/x";
  EXPECT_NE(init_error({}, o).find("not supported"), std::string::npos);
  o.init_method = "tcp://nohostport";
  EXPECT_NE(init_error({}, o).find("malformed"), std::string::npos);
  o.init_method = "tcp://127.0.0.1:1234";
  EXPECT_NE(init_error({}, o).find("world_size=-1"), std::string::npos);
  if (!backend_available("nccl")) {
    o.backend = "nccl";
    o.init_method = "env://";
    const std::string m =
        init_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}}, o);
    EXPECT_NE(m.find("not part of this build"), std::string::npos) << m;
    EXPECT_NE(m.find("'cpu'"), std::string::npos) << m;
  }
}

TEST(InitTcp, WorldOfOneWorksAndHostsItsOwnStore) {
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  o.rank = 0;
  o.world_size = 1;
  o.timeout = 5000ms;
  auto pg = init_process_group(o);
  EXPECT_EQ(pg->size(), 1);
  std::vector<float> v{1, 2, 3}, out(3);
  pg->all_reduce(view(v), ReduceOp::avg);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  pg->all_gather(view(v), view(out));
  EXPECT_EQ(out, v);
  pg->barrier();
  EXPECT_EQ(pg->last_seq(), 3u);
}

TEST(InitTcp, ThreadsAsRanksAndTwoGenerationsOfTheSameGroup) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  std::vector<std::thread> ts;
  std::vector<float> results(3);
  for (int r = 0; r < 3; ++r) {
    ts.emplace_back([&, r] {
      TcpStoreOptions so;
      so.port = server.port();
      for (int gen = 0; gen < 2; ++gen) {
        InitOptions o;
        o.store = std::make_shared<TcpStore>(so);
        o.rank = r;
        o.world_size = 3;
        o.timeout = 10000ms;
        auto pg = init_process_group(o);
        std::vector<float> v{static_cast<float>(r + gen)};
        pg->all_reduce(view(v));
        results[r] += v[0];
      }
    });
  }
  for (auto& t : ts) t.join();
  for (float x : results) EXPECT_EQ(x, 3.0f + 6.0f);
}

// InitOptions::settings steer the backend as the variables do, and win
// over them; ranks given different ones are refused at init.
std::vector<std::string> threads_as_ranks(int n, const std::function<InitOptions(int)>& options_of,
                                          const std::function<std::string(ProcessGroup&)>& body) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  std::vector<std::string> out(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      TcpStoreOptions so;
      so.port = server.port();
      InitOptions o = options_of(r);
      o.store = std::make_shared<TcpStore>(so);
      o.rank = r;
      o.world_size = n;
      o.timeout = 10000ms;
      try {
        auto pg = init_process_group(o);
        out[r] = body(*pg);
      } catch (const ConfigError& e) {
        out[r] = std::string("ConfigError: ") + e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

TEST(InitSettings, GivenSettingsChooseTheAlgorithmOverTheEnvironment) {
  EnvGuard g;
  g.set("MCI_ALGO", "direct");
  const auto algos = threads_as_ranks(
      2,
      [](int) {
        InitOptions o;
        o.settings = {{"MCI_ALGO", "ring"}, {"MCI_TRANSPORT", "tcp"}};
        return o;
      },
      [](ProcessGroup& pg) {
        std::vector<float> v{1, 2, 3, 4};
        auto w = pg.all_reduce(view(v), ReduceOp::sum, Exec::async);
        w.wait();
        return w.algorithm() + " " + std::to_string(v[3]);
      });
  EXPECT_EQ(algos, (std::vector<std::string>{"ring 8.000000", "ring 8.000000"}));
}

TEST(InitSettings, RanksGivenDifferentSettingsAreRefused) {
  const auto errors = threads_as_ranks(
      2,
      [](int r) {
        InitOptions o;
        if (r == 1) o.settings = {{"MCI_CONNECT", "eager"}};
        return o;
      },
      [](ProcessGroup&) { return std::string("joined"); });
  for (const auto& e : errors) {
    EXPECT_NE(
        e.find("the ranks disagree on mci's settings: rank 0 has MCI_ALGO=auto MCI_REPRODUCIBLE=0 MCI_TRANSPORT=auto "
               "MCI_SHM_BUFFER_BYTES=524288 MCI_CONNECT=lazy, rank 1 has"),
        std::string::npos)
        << e;
    EXPECT_NE(e.find("MCI_CONNECT=eager. Set MCI_ALGO, MCI_REPRODUCIBLE, MCI_TRANSPORT, MCI_SHM_BUFFER_BYTES and "
                     "MCI_CONNECT the same"),
              std::string::npos)
        << e;
  }
}

TEST(InitSettings, AnUnknownOrMalformedSettingStopsInitBeforeConnecting) {
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:1";  // nothing listens: init must fail before trying
  o.rank = 0;
  o.world_size = 2;
  o.settings = {{"MCI_TRANSPROT", "tcp"}};
  std::string m = init_error({}, o);
  EXPECT_NE(m.find("'MCI_TRANSPROT' is not one of mci's settings"), std::string::npos) << m;
  o.settings = {{"MCI_HANG_REPORT_WAIT_MS", "soon"}};
  m = init_error({}, o);
  EXPECT_NE(m.find("MCI_HANG_REPORT_WAIT_MS='soon' is not an integer"), std::string::npos) << m;
  const auto listed = list_settings();
  const auto algo =
      std::find_if(listed.begin(), listed.end(), [](const SettingInfo& i) { return i.name == "MCI_ALGO"; });
  ASSERT_NE(algo, listed.end());
  EXPECT_TRUE(algo->ranks_agree);
  EXPECT_TRUE(algo->settable);
}

TEST(InitTcp, DuplicateRankIsCaught) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  TcpStoreOptions so;
  so.port = server.port();
  std::vector<std::string> errs(2);
  std::vector<std::thread> ts;
  for (int k = 0; k < 2; ++k) {
    ts.emplace_back([&, k] {
      InitOptions o;
      o.store = std::make_shared<TcpStore>(so);
      o.rank = 1;
      o.world_size = 2;
      o.timeout = 1500ms;
      try {
        init_process_group(o);
      } catch (const std::exception& e) {
        errs[k] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  const std::string both = errs[0] + " | " + errs[1];
  EXPECT_NE(both.find("RANK 1 is used by two processes"), std::string::npos) << both;
}

// abort() fails a point-to-point operation the progress thread is running
// (a recv whose send never comes) at once, with the abort's reason: it does
// not wait for it until the group's timeout (a program leaving with an
// irecv pending: mci_torch aborts its groups at exit).
TEST(Abort, FailsARunningRecvAtOnceWithItsReason) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  const auto out = threads_as_ranks(
      2, [](int) { return InitOptions{}; },
      [&](ProcessGroup& pg) -> std::string {
        if (pg.rank() == 1) {
          done.wait();  // alive (no PeerError) until rank 0 has seen its error
          return "";
        }
        std::vector<float> buf(4);
        Work w = pg.recv(view(buf), 1, 0, Exec::async);
        pg.abort("the program is leaving");
        std::string text;
        try {
          w.wait();
        } catch (const Error& e) {
          text = e.what();
        }
        rank0_done.set_value();
        return text;
      });
  EXPECT_NE(out[0].find("recv"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("aborted by the user: the program is leaving"), std::string::npos) << out[0];
}

// abort() from another thread while a blocking operation runs on this one
// (a recv whose send never comes, a collective a peer never joins): the
// operation fails with the abort's reason, not at the group's timeout (10
// s here) with the timeout's text, and the peer waiting on this rank hears
// that this rank aborted, not silence until its own timeout. It used to
// wait for the recv's timeout (3.86 s of a 4 s timeout). Over TCP and over
// shared memory.
TEST(Abort, FailsABlockingOperationOnAnotherThreadAndThePeerHearsIt) {
  for (const char* transport : {"tcp", "shm"}) {
    for (const bool collective : {false, true}) {
      const auto out = threads_as_ranks(
          2,
          [&](int) {
            InitOptions o;
            o.settings = {{"MCI_TRANSPORT", transport}};
            return o;
          },
          [&](ProcessGroup& pg) -> std::string {
            std::vector<float> buf(1024);
            // Connected first (connections are made on first use): an abort
            // tells its reason to the peers it is connected to; one never
            // connected finds the rank gone when it dials.
            if (pg.rank() == 0) pg.send(view(buf), 1, 1);
            if (pg.rank() == 1) pg.recv(view(buf), 0, 1);
            if (pg.rank() == 1) {
              // Waits on rank 0, which never sends.
              try {
                pg.recv(view(buf), 0, 9);
              } catch (const TimeoutError& e) {
                return std::string("TIMEOUT: ") + e.what();
              } catch (const Error& e) {
                return e.what();
              }
              return "returned";
            }
            std::thread aborter([&] {
              std::this_thread::sleep_for(200ms);  // inside the wait by then; if not, it fails at once anyway
              pg.abort("the user stopped the job");
            });
            std::string text = "returned";
            try {
              if (collective) {
                pg.all_reduce(view(buf));  // rank 1 never joins it
              } else {
                pg.recv(view(buf), 1, 9);
              }
            } catch (const TimeoutError& e) {
              text = std::string("TIMEOUT: ") + e.what();
            } catch (const Error& e) {
              text = e.what();
            }
            aborter.join();
            return text;
          });
      const std::string where = fmt::format("{} {}", transport, collective ? "collective" : "recv");
      EXPECT_NE(out[0].find("aborted by the user: the user stopped the job"), std::string::npos)
          << where << ": " << out[0];
      EXPECT_EQ(out[0].find("TIMEOUT"), std::string::npos) << where << ": " << out[0];
      EXPECT_NE(out[1].find("aborted"), std::string::npos) << where << ": " << out[1];
      EXPECT_EQ(out[1].find("TIMEOUT"), std::string::npos) << where << ": " << out[1];
    }
  }
}

}  // namespace
}  // namespace mci
