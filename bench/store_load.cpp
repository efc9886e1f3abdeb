// The store under a crowd: N simulated clients (default 4,096) on loopback,
// each authenticating and then running rounds of set, add, get (of the next
// client's key) and wait (for two others'), against a StoreServer in this
// process. Prints latency percentiles per request kind and the throughput;
// exits 1 if any client was dropped or answered wrongly.
//
//   store_load [--clients N] [--rounds R] [--threads T] [--flood]
//
// --flood adds a stranger opening connections (silent, junk, requests
// before authenticating) for the length of the run.
#include <sys/resource.h>

#include <cstdlib>
#include <future>
#include <string>

#include <fmt/format.h>

#include "mci/store.hpp"
#include "store_load.hpp"

int main(int argc, char** argv) {
  mci::test::StoreLoadOptions o;
  o.token = "bench-token";
  o.limit = std::chrono::seconds(300);
  bool flood = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int {
      if (i + 1 >= argc) {
        fmt::print(stderr, "store_load: {} needs a number\n", a);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--clients") {
      o.clients = next();
    } else if (a == "--rounds") {
      o.rounds = next();
    } else if (a == "--threads") {
      o.threads = next();
    } else if (a == "--flood") {
      flood = true;
    } else {
      fmt::print(stderr, "store_load: unknown option '{}': use --clients N, --rounds R, --threads T, --flood\n", a);
      return 2;
    }
  }
  if (o.clients < 2 || o.rounds < 1 || o.threads < 1) {
    fmt::print(stderr, "store_load: --clients >= 2, --rounds >= 1, --threads >= 1\n");
    return 2;
  }
  // Both ends of every connection are in this process.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const rlim_t need = 2 * static_cast<rlim_t>(o.clients) + (flood ? 8200 : 0) + 256;
  if (rl.rlim_cur < need) {
    rl.rlim_cur = std::min(need, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    fmt::print("# descriptor soft limit raised to {}\n", rl.rlim_cur);
  }
  if (rl.rlim_cur < need) {
    fmt::print(stderr, "store_load: {} clients need {} descriptors, the hard limit is {}: fewer clients, or raise it\n",
               o.clients, need, rl.rlim_max);
    return 1;
  }
  mci::StoreServer server(mci::StoreServerOptions{"127.0.0.1", 0, o.token});
  o.port = server.port();
  std::future<int> stranger;
  if (flood) {
    stranger = std::async(std::launch::async, [&] {
      return mci::test::stranger_flood("127.0.0.1", server.port(), std::chrono::seconds(5));
    });
  }
  auto r = mci::test::run_store_load(o);
  const int opened = flood ? stranger.get() : 0;
  fmt::print("# store_load: {} clients x {} rounds on {} threads{}; load {}\n", o.clients, o.rounds, o.threads,
             flood ? fmt::format(", a stranger flooding ({} connections)", opened) : "", [] {
               double l[3] = {};
               return getloadavg(l, 3) == 3 ? fmt::format("{:.2f} {:.2f} {:.2f}", l[0], l[1], l[2]) : "?";
             }());
  fmt::print(
      "clients finished {} / failed {} / unfinished {}; {} requests in {:.2f} s ({:.0f} req/s); store "
      "dropped {} connection(s)\n",
      r.finished, r.failed, r.unfinished, r.requests, r.seconds, static_cast<double>(r.requests) / r.seconds,
      server.rejected_connections());
  fmt::print("| requests | count | p50 us | p90 us | p99 us | p99.9 us | max us |\n|---|---|---|---|---|---|---|\n");
  for (auto* v : {&r.immediate_us, &r.waiting_us}) {
    const auto n = v->size();
    fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |\n",
               v == &r.immediate_us ? "set, add" : "get, wait (until written)", n, mci::test::percentile(*v, 0.5),
               mci::test::percentile(*v, 0.9), mci::test::percentile(*v, 0.99), mci::test::percentile(*v, 0.999),
               mci::test::percentile(*v, 1.0));
  }
  for (const auto& e : r.errors) fmt::print(stderr, "store_load: {}\n", e);
  return r.finished == o.clients ? 0 : 1;
}
