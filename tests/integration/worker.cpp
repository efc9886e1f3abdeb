// mci_test_worker: one rank of a multi-process test. The test starts N of
// these with RANK/WORLD_SIZE/MASTER_* set and reads their output and exit
// codes. Exit codes: 0 success, 10 TimeoutError, 11 PeerError,
// 12 MismatchError, 13 ConfigError, 14 other mci::Error, 1 test failure.
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mci/mci.hpp"
#include "../support/matrix.hpp"

namespace {

using namespace std::chrono_literals;
using mci::BufferView;
using mci::DType;
using mci::Exec;

long long env_ll(const char* name, long long dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : dflt;
}

std::shared_ptr<mci::ProcessGroup> join() {
  // MCI_TEST_HOSTS="a,a,b,b": rank r pretends to be on host number r's entry.
  if (const char* hosts = std::getenv("MCI_TEST_HOSTS")) {
    std::vector<std::string> ids;
    std::string list = hosts;
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      ids.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    const auto rank = static_cast<std::size_t>(env_ll("RANK", 0));
    if (rank < ids.size()) ::setenv("MCI_HOST_ID", ids[rank].c_str(), 1);
  }
  mci::InitOptions o;
  o.backend = std::getenv("MCI_TEST_BACKEND") ? std::getenv("MCI_TEST_BACKEND") : "cpu";
  o.timeout = std::chrono::milliseconds(env_ll("MCI_TEST_TIMEOUT_MS", 60000));
  return mci::init_process_group(o);
}

void say(const std::string& s) {
  std::string line = s + "\n";
  ssize_t w = ::write(1, line.data(), line.size());
  (void)w;
}

int matrix(bool quick) {
  auto pg = join();
  mci::test::MatrixConfig cfg;
  if (quick) {
    cfg.bytes = {(3u << 20) + 12};  // several pipeline chunks, blocks of odd sizes
    cfg.dtypes = {DType::f32, DType::bf16, DType::i32};
  }
  int failures = mci::test::run_matrix(*pg, cfg, std::cout);
  std::cout << fmt::format("rank {} matrix done: {} failures, {} collectives\n", pg->rank(), failures,
                           pg->last_seq())
            << std::flush;
  return failures == 0 ? 0 : 1;
}

// Rank 1 never enters the all-reduce; rank 0 must time out and say so.
int timeout_scenario() {
  auto pg = join();
  std::vector<float> v{1, 2};
  if (pg->rank() == 1) {
    say("rank 1 skips");
    std::this_thread::sleep_for(std::chrono::milliseconds(env_ll("MCI_TEST_SLEEP_MS", 3000)));
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    pg->all_reduce(mci::view(v));
  } catch (...) {
    say(fmt::format("waited_ms {}", std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - t0).count()));
    throw;
  }
  return 1;
}

// Rank 1 is slow (sleeps before each all-reduce) but well within the
// timeout: a slow step, which MCI_DEBUG=timing attributes to rank 1.
int slow_step() {
  auto pg = join();
  std::vector<float> v{1, 2};
  pg->barrier();
  for (int step = 0; step < 3; ++step) {
    if (pg->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(env_ll("MCI_TEST_SLEEP_MS", 400)));
    pg->all_reduce(mci::view(v));
  }
  say("slow steps done");
  return 0;
}

// Rank 1 stops itself (SIGSTOP) before the all-reduce: a frozen rank is a
// hang (timeout + report), not a crash.
int stopped_scenario() {
  auto pg = join();
  std::vector<float> v{1, 2};
  pg->barrier();
  if (pg->rank() == 1) {
    say("rank 1 stops");
    ::kill(::getpid(), SIGSTOP);
    return 0;
  }
  pg->all_reduce(mci::view(v));
  return 1;
}

// The last rank dies in the middle of a large all-reduce.
int peer_death() {
  auto pg = join();
  const std::size_t n = env_ll("MCI_TEST_COUNT", 16 << 20);
  std::vector<float> v(n, 1.0f);
  if (pg->rank() == pg->size() - 1) {
    pg->barrier();
    // Dies right after handing its all_reduce to the progress thread: the
    // operation (64 MiB by default, several ms of memory traffic at best)
    // cannot have finished, so the others are inside it, waiting for this
    // rank's data, whether it got to post some of it or not — or still in
    // the barrier, which this rank may leave before they do.
    auto w = pg->all_reduce(mci::view(v), mci::ReduceOp::sum, Exec::async);
    say(fmt::format("dying now (pid {})", ::getpid()));
    // SIGKILL, as `kill -9` from outside would: no destructor, no goodbye.
    if (std::getenv("MCI_TEST_SIGKILL")) ::kill(::getpid(), SIGKILL);
    std::_Exit(9);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    pg->barrier();
    pg->all_reduce(mci::view(v));
  } catch (...) {
    say(fmt::format("noticed_ms {}", std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - t0).count()));
    throw;
  }
  return 1;
}

// Rank 0 calls all_reduce while the others call broadcast.
int mismatch() {
  auto pg = join();
  std::vector<float> v(8, 1.0f);
  if (pg->rank() == 0) {
    pg->all_reduce(mci::view(v));
  } else {
    pg->broadcast(mci::view(v), 0);
  }
  return 1;
}

// Async calls run in order while the caller computes; each Work has a time.
int async_overlap() {
  auto pg = join();
  const int n = pg->size();
  std::vector<std::vector<float>> bufs(6, std::vector<float>(100000));
  std::vector<mci::Work> works;
  for (std::size_t k = 0; k < bufs.size(); ++k) {
    for (auto& x : bufs[k]) x = static_cast<float>(pg->rank() + k);
    works.push_back(pg->all_reduce(mci::view(bufs[k]), mci::ReduceOp::sum, Exec::async));
  }
  // Compute while the collectives run.
  double acc = 0;
  for (int i = 0; i < 2000000; ++i) acc += i * 1e-9;
  for (std::size_t k = 0; k < works.size(); ++k) {
    works[k].wait();
    if (!works[k].is_completed() || !works[k].is_success()) return 1;
    if (works[k].seq() != k + 1) {
      say(fmt::format("work {} has seq {}", k, works[k].seq()));
      return 1;
    }
    const float want = static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(k));
    for (float x : bufs[k]) {
      if (x != want) {
        say(fmt::format("async all_reduce {} gave {} instead of {}", k, x, want));
        return 1;
      }
    }
  }
  // A blocking call after async ones waits for them and keeps the order.
  std::vector<float> last{1.0f};
  auto w1 = pg->all_reduce(mci::view(last), mci::ReduceOp::sum, Exec::async);
  pg->barrier();
  if (!w1.is_completed() || last[0] != static_cast<float>(n)) return 1;
  say(fmt::format("async ok ({:.0f})", acc));
  return 0;
}

// Receives match sends by tag, not by arrival order.
int p2p_tags() {
  auto pg = join();
  if (pg->size() < 2) return 1;
  if (pg->rank() == 0) {
    for (int tag : {1, 2, 3}) {
      std::vector<std::int32_t> v(5, tag * 10);
      pg->send(mci::view(v), 1, tag);
    }
  } else if (pg->rank() == 1) {
    for (int tag : {3, 1, 2}) {
      std::vector<std::int32_t> v(5, -1);
      pg->recv(mci::view(v), 0, tag);
      for (auto x : v) {
        if (x != tag * 10) {
          say(fmt::format("recv tag {} got {}", tag, x));
          return 1;
        }
      }
    }
  }
  pg->barrier();
  say("p2p ok");
  return 0;
}

// Every rank sends a large buffer to its right neighbour and receives one
// from its left with async calls: they must progress together, whatever the
// order and size (a serial queue would deadlock once socket buffers fill).
int p2p_exchange() {
  auto pg = join();
  const int n = pg->size(), r = pg->rank();
  const std::size_t count = 8u << 20;  // 32 MiB of floats each way
  std::vector<float> out(count, static_cast<float>(r)), in(count, -1.0f);
  auto ws = pg->send(mci::view(out), (r + 1) % n, 5, Exec::async);
  auto wr = pg->recv(mci::view(in), (r + n - 1) % n, 5, Exec::async);
  wr.wait();
  ws.wait();
  for (float x : in) {
    if (x != static_cast<float>((r + n - 1) % n)) {
      say(fmt::format("rank {} received {}", r, x));
      return 1;
    }
  }
  // A collective queued after point-to-point work runs after it.
  std::vector<float> one{1.0f};
  auto w2 = pg->send(mci::view(out), (r + 1) % n, 6, Exec::async);
  auto w3 = pg->recv(mci::view(in), (r + n - 1) % n, 6, Exec::async);
  auto w4 = pg->all_reduce(mci::view(one), mci::ReduceOp::sum, Exec::async);
  w4.wait();
  if (!w2.is_completed() || !w3.is_completed() || one[0] != static_cast<float>(n)) return 1;
  say("exchange ok");
  return 0;
}

// One misuse per case (MCI_TEST_CASE); prints what each rank got. Buffers
// must come out untouched when the call fails.
int misuse() {
  const std::string c = std::getenv("MCI_TEST_CASE") ? std::getenv("MCI_TEST_CASE") : "";
  const long long me = env_ll("RANK", 0);
  if (c == "world-size" && me == 1) ::setenv("WORLD_SIZE", "3", 1);
  if (c == "algo" && me == 0) ::setenv("MCI_ALGO", "ring", 1);
  if (c == "bad-algo") ::setenv("MCI_ALGO", "fastest", 1);
  auto pg = join();
  const int r = pg->rank();
  std::vector<float> f(r == 0 && c == "count" ? 4 : 8, 1.5f);
  const std::vector<float> before = f;
  std::vector<std::int32_t> i(8, 7);
  auto check_untouched = [&] {
    if (f != before) {
      say("BUFFER CHANGED");
      std::_Exit(3);
    }
  };
  try {
    if (c == "count" || c == "algo") {
      pg->all_reduce(mci::view(f));
    } else if (c == "dtype") {
      if (r == 0) pg->all_reduce(mci::view(f)); else pg->all_reduce(mci::view(i));
    } else if (c == "op") {
      pg->all_reduce(mci::view(f), r == 0 ? mci::ReduceOp::sum : mci::ReduceOp::max);
    } else if (c == "root") {
      // Both ranks think they are the root: no data reaches anyone in the
      // broadcast itself; the next collective finds the stray frame.
      pg->broadcast(mci::view(f), r == 0 ? 0 : 1);
      pg->barrier();
    } else if (c == "bad-root") {
      pg->broadcast(mci::view(f), r == 0 ? 5 : 0);
    } else if (c == "p2p-count") {
      if (r == 0) {
        pg->send(BufferView{f.data(), 4, DType::f32}, 1, 0);
      } else if (r == 1) {
        pg->recv(mci::view(f), 0, 0);
      }
    } else if (c == "after-error") {
      try {
        pg->all_reduce(mci::view(f), r == 0 ? mci::ReduceOp::sum : mci::ReduceOp::min);
      } catch (const mci::Error& e) {
        say(fmt::format("first error: {}", e.what()));
      }
      pg->barrier();
    } else {
      pg->barrier();
    }
  } catch (...) {
    check_untouched();
    throw;
  }
  check_untouched();
  return 0;
}

int init_only() {
  auto pg = join();
  pg->barrier();
  say(fmt::format("joined rank {} size {} local_rank {}", pg->rank(), pg->size(), pg->local_rank()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Die with the test that started us: no orphans even if it crashes.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::string what = argc > 1 ? argv[1] : "";
  try {
    if (what == "matrix") return matrix(false);
    if (what == "matrix-quick") return matrix(true);
    if (what == "timeout") return timeout_scenario();
    if (what == "peer-death") return peer_death();
    if (what == "stopped") return stopped_scenario();
    if (what == "slow") return slow_step();
    if (what == "mismatch") return mismatch();
    if (what == "async") return async_overlap();
    if (what == "p2p-tags") return p2p_tags();
    if (what == "p2p-exchange") return p2p_exchange();
    if (what == "init") return init_only();
    if (what == "misuse") return misuse();
    std::cerr << "unknown scenario '" << what << "'\n";
    return 2;
  } catch (const mci::TimeoutError& e) {
    say(fmt::format("TimeoutError: {}", e.what()));
    return 10;
  } catch (const mci::PeerError& e) {
    say(fmt::format("PeerError(peer {}): {}", e.peer(), e.what()));
    return 11;
  } catch (const mci::MismatchError& e) {
    say(fmt::format("MismatchError: {}", e.what()));
    return 12;
  } catch (const mci::ConfigError& e) {
    say(fmt::format("ConfigError: {}", e.what()));
    return 13;
  } catch (const mci::Error& e) {
    say(fmt::format("Error: {}", e.what()));
    return 14;
  }
}
