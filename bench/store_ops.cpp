// Store operation latency as a rank sees it: mci's own store (a StoreServer,
// what node 0's mcirun hosts) beside the store on etcd reached through a
// node's relay (what every node's mcirun serves under --rdzv_backend=etcd),
// each from a TcpStore client on loopback. Rounds alternate between the two,
// so a machine that drifts hurts both alike. Prints, per operation, the
// median and p99 in microseconds for each store and their ratio.
//
//   bench_store_ops --etcd HOST:PORT [--ops N] [--rounds R]
//
// etcd's own speed depends on its disk (it syncs every write): give it a
// data folder on tmpfs to measure the protocol rather than the disk.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mci/store.hpp"
#include "store/store_relay.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Samples = std::map<std::string, std::vector<double>>;  // op -> microseconds

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// One round of every operation, `n` times each, on fresh keys.
void round_of(mci::Store& s, mci::Store& writer, const std::string& tag, int n, Samples& out) {
  using namespace std::chrono_literals;
  const mci::StoreValue v = mci::to_bytes("value");
  for (int i = 0; i < n; ++i) {
    const std::string k = fmt::format("{}/{}", tag, i);
    auto t0 = Clock::now();
    s.set(k, v);
    out["set"].push_back(us_since(t0));
    t0 = Clock::now();
    (void)s.get(k, 5000ms);
    out["get (present)"].push_back(us_since(t0));
    t0 = Clock::now();
    (void)s.add(tag + "/counter", 1);
    out["add"].push_back(us_since(t0));
    t0 = Clock::now();
    (void)s.compare_set(k, v, mci::to_bytes("next"));
    out["compare_set"].push_back(us_since(t0));
    t0 = Clock::now();
    (void)s.check({k});
    out["check"].push_back(us_since(t0));
  }
  // A wait woken by another client's write: from the write's start to the
  // waiter's return (what an agreement's last arrival costs the others).
  for (int i = 0; i < std::max(1, n / 10); ++i) {
    const std::string k = fmt::format("{}/woken/{}", tag, i);
    Clock::time_point written;
    std::thread w([&] {
      std::this_thread::sleep_for(2ms);
      written = Clock::now();
      writer.set(k, v);
    });
    (void)s.get(k, 5000ms);
    const auto woken = Clock::now();
    w.join();  // before reading `written`, which it wrote
    const double us = std::chrono::duration<double, std::micro>(woken - written).count();
    out["wait woken by a set"].push_back(us);
  }
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string etcd;
  int ops = 500, rounds = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--etcd") {
      etcd = argv[i + 1];
    } else if (a == "--ops") {
      ops = std::atoi(argv[i + 1]);
    } else if (a == "--rounds") {
      rounds = std::atoi(argv[i + 1]);
    } else {
      fmt::print(stderr, "bench_store_ops: unknown option '{}'\n", a);
      return 2;
    }
  }
  if (etcd.empty() || ops < 10 || rounds < 1) {
    fmt::print(stderr, "usage: bench_store_ops --etcd HOST:PORT [--ops N>=10] [--rounds R>=1]\n");
    return 2;
  }
  const std::string token = "bench-store-ops";
  mci::StoreServer server(mci::StoreServerOptions{"127.0.0.1", 0, token});
  mci::StoreRelayOptions ro;
  ro.token = token;
  ro.etcd.endpoints = {etcd};
  ro.etcd.job_id = fmt::format("bench-store-ops-{}", ::getpid());
  mci::StoreRelay relay(ro);
  const auto client = [&](int port) {
    mci::TcpStoreOptions o;
    o.port = port;
    o.token = token;
    return std::make_unique<mci::TcpStore>(o);
  };
  auto tcp = client(server.port()), tcp_writer = client(server.port());
  auto via_relay = client(relay.port()), relay_writer = client(relay.port());
  Samples on_tcp, on_etcd;
  for (int r = 0; r < rounds; ++r) {
    // Alternating which goes first.
    if (r % 2 == 0) {
      round_of(*tcp, *tcp_writer, fmt::format("r{}", r), ops, on_tcp);
      round_of(*via_relay, *relay_writer, fmt::format("r{}", r), ops, on_etcd);
    } else {
      round_of(*via_relay, *relay_writer, fmt::format("r{}", r), ops, on_etcd);
      round_of(*tcp, *tcp_writer, fmt::format("r{}", r), ops, on_tcp);
    }
  }
  fmt::print("| operation | mci store p50 us | p99 us | etcd via relay p50 us | p99 us | etcd/mci (p50) |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  for (const auto& [op, mine] : on_tcp) {
    const auto& theirs = on_etcd.at(op);
    fmt::print("| {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.1f}x |\n", op, pct(mine, 0.5), pct(mine, 0.99),
               pct(theirs, 0.5), pct(theirs, 0.99), pct(theirs, 0.5) / pct(mine, 0.5));
  }
  fmt::print("({} rounds x {} operations of each kind, {} waits per round)\n", rounds, ops, std::max(1, ops / 10));
  return 0;
}
