// An in-process job: one thread per rank, each with its own store client and
// process group over real sockets. For tests that need several ranks but not
// several processes (and that sanitizers see whole).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mci/init.hpp"
#include "mci/store.hpp"

namespace mci::test {

// Runs body(pg) on `world` threads; returns each rank's exception text ("" if
// none).
inline std::vector<std::string> run_ranks(int world,
                                          const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                                          std::string backend = "cpu",
                                          std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                          const std::function<void(InitOptions&)>& tweak = {}) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  std::vector<std::string> errors(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) {
    ts.emplace_back([&, r] {
      try {
        TcpStoreOptions so;
        so.port = server.port();
        InitOptions o;
        o.store = std::make_shared<TcpStore>(so);
        o.rank = r;
        o.world_size = world;
        o.timeout = timeout;
        o.backend = backend;
        if (tweak) tweak(o);
        body(init_process_group(o));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  return errors;
}

}  // namespace mci::test
