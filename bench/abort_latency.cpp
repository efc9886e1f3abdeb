// How long ProcessGroup::abort() takes to end an operation blocked on
// another thread, and how long until the peer waiting on this rank hears
// it. Two ranks are two threads of this process (a store of their own,
// real sockets, real shared memory); each round forms a fresh group (an
// aborted group is done), rank 0 blocks in a recv (or an all_reduce) that
// rank 1 never answers while rank 1 blocks in a recv from rank 0, and a
// third thread calls abort() on rank 0 a moment later.
//
//   bench_abort_latency [--rounds N]
//
// Prints, per transport and operation, the distribution (min, median, p90,
// p99, max) of: abort()'s own duration; from the call to rank 0's
// operation failing; from the call to rank 1's recv failing.
#include <mci/mci.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Round {
  double call_us = 0, own_us = 0, peer_us = 0;
};

Round one_round(const std::string& transport, bool collective) {
  mci::StoreServer server(mci::StoreServerOptions{"127.0.0.1", 0, ""});
  std::promise<std::shared_ptr<mci::ProcessGroup>> made[2];
  Clock::time_point called{}, own_failed{}, peer_failed{};
  std::promise<void> ready0, connected;
  std::shared_future<void> go = connected.get_future().share();
  auto rank = [&](int r) {
    mci::TcpStoreOptions so;
    so.port = server.port();
    mci::InitOptions o;
    o.store = std::make_shared<mci::TcpStore>(so);
    o.rank = r;
    o.world_size = 2;
    o.timeout = 30s;
    o.settings = {{"MCI_TRANSPORT", transport}};
    auto pg = mci::init_process_group(o);
    std::vector<float> buf(1024);
    // Connected before the round (connections are made on first use).
    if (r == 0) pg->send(mci::view(buf), 1, 1);
    if (r == 1) pg->recv(mci::view(buf), 0, 1);
    made[r].set_value(pg);
    try {
      if (r == 1) {
        pg->recv(mci::view(buf), 0, 9);
      } else {
        ready0.set_value();
        if (collective) {
          pg->all_reduce(mci::view(buf));
        } else {
          pg->recv(mci::view(buf), 1, 9);
        }
      }
    } catch (const mci::Error&) {
      (r == 0 ? own_failed : peer_failed) = Clock::now();
    }
  };
  std::thread t0(rank, 0), t1(rank, 1);
  auto pg0 = made[0].get_future().get();
  ready0.get_future().wait();
  std::this_thread::sleep_for(20ms);  // inside its wait by now
  called = Clock::now();
  pg0->abort("benchmark");
  const auto returned = Clock::now();
  t0.join();
  t1.join();
  return {us(returned - called), us(own_failed - called), us(peer_failed - called)};
}

void print(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("  %-28s min %8.1f  median %8.1f  p90 %8.1f  p99 %8.1f  max %8.1f us\n", what, v.front(), at(0.5),
              at(0.9), at(0.99), v.back());
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 100;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  for (const char* transport : {"tcp", "shm"}) {
    for (const bool collective : {false, true}) {
      std::vector<double> call, own, peer;
      for (int k = 0; k < rounds; ++k) {
        const Round r = one_round(transport, collective);
        call.push_back(r.call_us);
        own.push_back(r.own_us);
        peer.push_back(r.peer_us);
      }
      std::printf("%s, rank 0 blocked in %s (%d rounds):\n", transport, collective ? "all_reduce" : "recv", rounds);
      print("abort() returns", call);
      print("rank 0's operation fails", own);
      print("rank 1's recv fails", peer);
    }
  }
}
