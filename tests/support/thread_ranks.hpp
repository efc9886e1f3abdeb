// An in-process job: one thread per rank, each with its own store client and
// process group over real sockets. For tests that need several ranks but not
// several processes (and that sanitizers see whole).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mci/init.hpp"
#include "mci/store.hpp"

namespace mci::test {

// Runs body(rank) on n threads and joins them all; returns each rank's
// exception text ("" if none).
inline std::vector<std::string> run_threads(int n, const std::function<void(int rank)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> ts;
  ts.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  return errors;
}

// Every rank's failures in rank order, each rank's list followed by its
// exception text if it has one (errors as run_threads returns them).
inline std::vector<std::string> flatten(const std::vector<std::vector<std::string>>& failures,
                                        const std::vector<std::string>& errors) {
  std::vector<std::string> all;
  for (std::size_t r = 0; r < failures.size(); ++r) {
    all.insert(all.end(), failures[r].begin(), failures[r].end());
    if (r < errors.size() && !errors[r].empty()) all.push_back(errors[r]);
  }
  return all;
}

// Runs body(pg) on `world` threads; returns each rank's exception text ("" if
// none).
inline std::vector<std::string> run_ranks(int world, const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                                          std::string backend = "cpu",
                                          std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                          const std::function<void(InitOptions&)>& tweak = {}) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, ""});
  return run_threads(world, [&](int r) {
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
  });
}

}  // namespace mci::test
