// Hierarchical collectives through run_algorithm with one thread per rank and
// pretend hosts: the ranks of a host share a ShmWorld mapped in this process,
// a rank alone on its host has none, and the mesh between the leaders (the
// lowest rank of each host) is a loopback over all ranks. Results are checked
// against values computed locally (perf/check.hpp, as the collective matrix).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <latch>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/algorithm_table.hpp"
#include "collectives/select.hpp"
#include "perf/check.hpp"
#include "support/loopback_ranks.hpp"
#include "support/loopback_transport.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::coll {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

// Small, so the larger sizes take several chunks inside a host.
constexpr std::size_t kShmBufferBytes = 64 * 1024;

struct HierarchicalCase {
  std::size_t count;
  ReduceOp op;
  bool in_place;
};

// Up to and above the shared-memory buffer (several chunks), across the
// direct/sliced threshold inside a host, the recursive-doubling/ring
// threshold between leaders, and (5 MB) the pipelined exchange of two hosts.
std::vector<HierarchicalCase> cases() {
  std::vector<HierarchicalCase> out;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{40000}, std::size_t{300007},
                            std::size_t{1300001}}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      for (bool in_place : {false, true}) out.push_back(HierarchicalCase{count, op, in_place});
    }
  }
  return out;
}

std::string unique_name(char host) {
  static std::atomic<int> counter{0};
  return fmt::format("/mci-test-hier-{}-{}-{}", ::getpid(), host, counter++);
}

// What one rank runs: its places, its rank and the world size; returns
// what it found wrong.
using RankBody = std::function<std::vector<std::string>(const Places&, int rank, int n)>;

// hosts[r] names rank r's host: "aabb" is two hosts of two ranks each.
// window_bytes: how much the links between ranks hold in flight (0: a send
// completes at once). Returns every failure, rank by rank.
std::vector<std::string> run_hosts(const std::string& hosts, const RankBody& run, std::size_t window_bytes = 0) {
  const int n = static_cast<int>(hosts.size());
  std::vector<std::vector<int>> by_host;
  std::vector<std::vector<int>> members(static_cast<std::size_t>(n));  // rank -> its host's ranks
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      if (hosts[q] == hosts[r]) members[r].push_back(q);
    }
    if (members[r].front() == r) by_host.push_back(members[r]);
  }
  const HostMap map(by_host);
  // Each host's shm segment is created before any rank opens it.
  std::vector<std::string> names(static_cast<std::size_t>(n));
  std::vector<std::optional<transport::ShmSegment>> created(static_cast<std::size_t>(n));
  for (int leader : map.leaders()) {
    if (members[leader].size() < 2) continue;
    names[leader] = unique_name(hosts[leader]);
    created[leader].emplace(
        transport::ShmSegment::create(names[leader], static_cast<int>(members[leader].size()), kShmBufferBytes));
  }

  std::latch mapped(n);
  std::vector<std::vector<std::string>> failures(static_cast<std::size_t>(n));
  const std::vector<std::string> errors = test::run_loopback(
      n,
      [&](transport::LoopbackTransport& mesh) {
        const int r = mesh.rank();
        const std::vector<int>& mine = members[r];
        const int size = static_cast<int>(mine.size());
        const int local = static_cast<int>(std::find(mine.begin(), mine.end(), r) - mine.begin());
        std::optional<transport::ShmWorld> host;
        bool arrived = false;
        try {
          if (size > 1) {
            const std::string& name = names[mine.front()];
            host.emplace(local == 0 ? std::move(*created[r]) : transport::ShmSegment::open(name, size, kShmBufferBytes),
                         local, size, mine);
          }
          arrived = true;
          mapped.arrive_and_wait();
          if (host && local == 0) host->unlink_name();
          SharedCopier copier;
          Scratch packed;
          const Places places{.mesh = &mesh,
                              .shm = host ? &*host : nullptr,
                              .hosts = &map,
                              .packed = &packed,
                              .copier = &copier};
          for (auto& f : run(places, r, n)) failures[r].push_back(fmt::format("rank {} of {}: {}", r, hosts, f));
        } catch (const std::exception& e) {
          if (!arrived) mapped.count_down();
          // The others fail at once instead of at their deadline.
          mesh.abort(e.what());
          if (host) host->abort(e.what());
          throw std::runtime_error(fmt::format("rank {} of {}: threw {}", r, hosts, e.what()));
        }
      },
      window_bytes);
  return test::flatten(failures, errors);
}

std::vector<std::string> all_reduces(const Places& places, int r, int n) {
  std::vector<std::string> failures;
  Scratch scratch;
  int round = 0;
  for (const HierarchicalCase& c : cases()) {
    ++round;
    const std::string where =
        fmt::format("all_reduce f32 x {} {}{}", c.count, reduce_op_name(c.op), c.in_place ? " in place" : "");
    const std::size_t bytes = c.count * 4;
    Bytes in(bytes), out(bytes, 0xA5), want(bytes);
    perf::fill_values(DType::f32, in.data(), c.count,
                      [&](std::size_t i) { return perf::input_value(DType::f32, r, round, i, false); });
    perf::fill_values(DType::f32, want.data(), c.count,
                      [&](std::size_t i) { return perf::reduced_value(DType::f32, c.op, n, round, i, false); });
    const Bytes keep = in;
    CollectiveDesc d;
    d.kind = OpKind::all_reduce;
    d.dtype = DType::f32;
    d.count = c.count;
    d.op = c.op;
    d.in = in.data();
    d.out = c.in_place ? in.data() : out.data();
    d.seq = static_cast<std::uint64_t>(round);
    d.algo = select_algo(OpKind::all_reduce, bytes, n, std::nullopt, Layout::hierarchical);
    if (d.algo != Algo::hierarchical) return {"all_reduce across hosts is not hierarchical"};
    run_algorithm(places, d, Deadline(60s), scratch);
    const auto* got = static_cast<const std::uint8_t*>(d.out);
    if (bytes && std::memcmp(got, want.data(), bytes) != 0) {
      std::size_t i = 0;
      while (std::memcmp(got + 4 * i, want.data() + 4 * i, 4) == 0) ++i;
      failures.push_back(fmt::format("{}: element {} is {} but must be {}", where, i,
                                     perf::get_value(DType::f32, got, i), perf::get_value(DType::f32, want.data(), i)));
    }
    if (!c.in_place && in != keep) failures.push_back(where + ": input changed");
  }
  return failures;
}

// Every other collective, every root kind, against values computed here:
// rank r's element i of block b is value(r, b, i), small integers exact in
// f32 (and their sums).
float value(int rank, int block, std::size_t i, int round) {
  return static_cast<float>(rank * 131 + block * 7 + static_cast<int>(i % 89) + round);
}

std::vector<std::string> every_collective(const Places& places, int r, int n, std::atomic<int>& arrived) {
  std::vector<std::string> failures;
  Scratch scratch;
  int round = 0, barriers = 0;
  auto run = [&](OpKind kind, std::size_t count, int root, ReduceOp op, const void* in, void* out) {
    CollectiveDesc d;
    d.kind = kind;
    d.dtype = DType::f32;
    d.count = count;
    d.op = op;
    d.root = has_root(kind) ? root : -1;
    d.in = in;
    d.out = out;
    d.seq = static_cast<std::uint64_t>(round);
    d.algo = select_algo(kind, d.bytes(), n, std::nullopt, Layout::hierarchical);
    if (d.algo != Algo::hierarchical) throw std::runtime_error(fmt::format("{} is not hierarchical", op_name(kind)));
    run_algorithm(places, d, Deadline(60s), scratch);
  };
  auto expect = [&](const std::string& what, const std::vector<float>& got, auto want) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want(i)) {
        failures.push_back(fmt::format("{}: element {} is {} but must be {}", what, i, got[i], want(i)));
        return;
      }
    }
  };
  const std::size_t un = static_cast<std::size_t>(n);
  // Broadcast large enough to go between hosts in pieces.
  for (int root : {0, 1, n - 1}) {
    ++round;
    const std::size_t count = 600001;
    std::vector<float> mine(count), out(count, -1.0f);
    for (std::size_t i = 0; i < count; ++i) mine[i] = value(r, 0, i, round);
    run(OpKind::broadcast, count, root, ReduceOp::sum, mine.data(), r == root ? mine.data() : out.data());
    expect(fmt::format("broadcast x {} root {}", count, root), r == root ? mine : out,
           [&](std::size_t i) { return value(root, 0, i, round); });
  }
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{40000}}) {
    for (int root : {0, 1, n - 1}) {
      ++round;
      const std::string at = fmt::format("x {} root {} round {}", count, root, round);
      // broadcast
      std::vector<float> mine(count), out(count, -1.0f);
      for (std::size_t i = 0; i < count; ++i) mine[i] = value(r, 0, i, round);
      run(OpKind::broadcast, count, root, ReduceOp::sum, mine.data(), out.data());
      expect("broadcast " + at, out, [&](std::size_t i) { return value(root, 0, i, round); });
      // reduce, sum and avg (avg of these sums is exact for n in 2..5 only
      // where it divides; compare with the same division in float)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        ++round;
        for (std::size_t i = 0; i < count; ++i) mine[i] = value(r, 0, i, round);
        std::fill(out.begin(), out.end(), -1.0f);
        run(OpKind::reduce, count, root, op, mine.data(), out.data());
        if (r == root) {
          expect(fmt::format("reduce {} {}", reduce_op_name(op), at), out, [&](std::size_t i) {
            float acc = op == ReduceOp::max ? value(n - 1, 0, i, round) : 0.0f;
            if (op != ReduceOp::max) {
              for (int q = 0; q < n; ++q) acc += value(q, 0, i, round);
            }
            return op == ReduceOp::avg ? acc / static_cast<float>(n) : acc;
          });
        }
      }
      // gather
      std::vector<float> all(count * un, -1.0f);
      run(OpKind::gather, count, root, ReduceOp::sum, mine.data(), all.data());
      if (r == root) {
        const std::size_t block = std::max<std::size_t>(count, 1);
        expect("gather " + at, all,
               [&](std::size_t i) { return value(static_cast<int>(i / block), 0, i % block, round); });
      }
      // scatter
      std::vector<float> rows(count * un);
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = value(r, static_cast<int>(i / count), i % count, round);
      std::fill(out.begin(), out.end(), -1.0f);
      run(OpKind::scatter, count, root, ReduceOp::sum, rows.data(), out.data());
      expect("scatter " + at, out, [&](std::size_t i) { return value(root, r, i, round); });
    }
    ++round;
    const std::string at = fmt::format("x {} round {}", count, round);
    const std::size_t block = std::max<std::size_t>(count, 1);
    std::vector<float> rows(count * un), all(count * un, -1.0f), out(count, -1.0f);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = value(r, static_cast<int>(i / block), i % block, round);
    // all_gather, out of place then in place
    run(OpKind::all_gather, count, -1, ReduceOp::sum, rows.data() + r * count, all.data());
    const auto gathered = [&](std::size_t i) {
      const int q = static_cast<int>(i / block);  // rank q's input is its block q
      return value(q, q, i % block, round);
    };
    expect("all_gather " + at, all, gathered);
    std::vector<float> inplace(count * un, -1.0f);
    std::copy(rows.begin() + static_cast<std::ptrdiff_t>(r * count),
              rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * count),
              inplace.begin() + static_cast<std::ptrdiff_t>(r * count));
    run(OpKind::all_gather, count, -1, ReduceOp::sum, inplace.data() + r * count, inplace.data());
    expect("all_gather in place " + at, inplace, gathered);
    // reduce_scatter: block r of the sum
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      std::fill(out.begin(), out.end(), -1.0f);
      run(OpKind::reduce_scatter, count, -1, op, rows.data(), out.data());
      expect(fmt::format("reduce_scatter {} {}", reduce_op_name(op), at), out, [&](std::size_t i) {
        float acc = 0.0f;
        for (int q = 0; q < n; ++q) acc += value(q, r, i, round);
        return op == ReduceOp::avg ? acc / static_cast<float>(n) : acc;
      });
    }
    // all_to_all: block s of the output is block r of rank s's input
    run(OpKind::all_to_all, count, -1, ReduceOp::sum, rows.data(), all.data());
    expect("all_to_all " + at, all,
           [&](std::size_t i) { return value(static_cast<int>(i / block), r, i % block, round); });
    // barrier: nobody leaves before everyone arrived
    ++barriers;
    arrived.fetch_add(1);
    run(OpKind::barrier, 0, -1, ReduceOp::sum, nullptr, nullptr);
    if (const int seen = arrived.load(); seen < n * barriers) {
      failures.push_back(
          fmt::format("barrier {} let rank {} through after {} of {} arrivals", barriers, r, seen, n * barriers));
    }
  }
  return failures;
}

void expect_clean(const std::string& hosts, const RankBody& run = all_reduces, std::size_t window_bytes = 0) {
  const std::vector<std::string> failures = run_hosts(hosts, run, window_bytes);
  for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
}

TEST(HierarchicalAllReduce, TwoHostsOfTwoRanks) { expect_clean("aabb"); }

TEST(HierarchicalAllReduce, ARankAloneOnItsHostHasNoSharedMemory) { expect_clean("abb"); }

TEST(HierarchicalAllReduce, HostsNeedNotHoldConsecutiveRanks) { expect_clean("abab"); }

TEST(HierarchicalAllReduce, ARingOfThreeHosts) { expect_clean("abcabc"); }

TEST(HierarchicalAllReduce, ARingOfFourUnequalHosts) { expect_clean("abcdab"); }

// Links that hold 16 KiB in flight, as TCP does on a job's first large
// calls: a send can still be leaving when the receive beside it is done.
// The two-host exchange summed into a piece it was still sending (issue
// 49); every case, every layout, several rounds, since which side waits
// is up to the threads.
constexpr std::size_t kSmallWindow = 16 * 1024;

TEST(HierarchicalAllReduce, LinksThatTakeLittleAtATime) {
  for (int round = 0; round < 3; ++round) {
    for (const char* hosts : {"aabb", "abb", "abab", "abcabc"}) expect_clean(hosts, all_reduces, kSmallWindow);
  }
}

// host_chain (MCI_REPRODUCIBLE across hosts): the bits of the rank-order
// fold ((x0 + x1) + x2) + ... computed here, whatever the hosts, on values
// of very different sizes (so that another order shows in the last bits).
// f64 and the consecutive layouts run the chain; bf16 (one rounding) and
// hosts of scattered ranks take the flat ordered algorithm.
template <class T>
T chain_input(int rank, std::size_t i) {
  const auto h = static_cast<std::uint32_t>((i + 1) * 2654435761u ^ static_cast<std::uint32_t>(rank) * 40503u);
  const double unit = static_cast<double>(h % 20001) / 10000.0 - 1.0;  // [-1, 1]
  return static_cast<T>(std::ldexp(unit, static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 3) % 24) - 12));
}

template <class T>
std::vector<std::string> chain_all_reduces(const Places& places, int r, int n, DType dt) {
  std::vector<std::string> failures;
  Scratch scratch;
  int round = 0;
  for (const HierarchicalCase& c : cases()) {
    ++round;
    std::vector<T> in(c.count), out(c.count), want(c.count);
    for (std::size_t i = 0; i < c.count; ++i) {
      in[i] = chain_input<T>(r, i);
      T acc = chain_input<T>(0, i);
      for (int q = 1; q < n; ++q) acc = acc + chain_input<T>(q, i);
      want[i] = c.op == ReduceOp::avg ? acc / static_cast<T>(n) : acc;
    }
    CollectiveDesc d;
    d.kind = OpKind::all_reduce;
    d.dtype = dt;
    d.count = c.count;
    d.op = c.op;
    d.in = in.data();
    d.out = c.in_place ? in.data() : out.data();
    d.seq = static_cast<std::uint64_t>(round);
    d.algo = select_algo(OpKind::all_reduce, c.count * sizeof(T), n, std::nullopt, Layout::hierarchical, true);
    if (c.count * sizeof(T) > kSmallAllReduceBytes && d.algo != Algo::host_chain) {
      return {"a large reproducible all_reduce across hosts is not host_chain"};
    }
    run_algorithm(places, d, Deadline(60s), scratch);
    const T* got = static_cast<const T*>(d.out);
    for (std::size_t i = 0; i < c.count; ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
        failures.push_back(fmt::format("host_chain {} x {} {}{}: element {} is {} but the fold is {}", dtype_name(dt),
                                       c.count, reduce_op_name(c.op), c.in_place ? " in place" : "", i,
                                       static_cast<double>(got[i]), static_cast<double>(want[i])));
        break;
      }
    }
  }
  return failures;
}

std::vector<std::string> chain_f32(const Places& p, int r, int n) {
  return chain_all_reduces<float>(p, r, n, DType::f32);
}
std::vector<std::string> chain_f64(const Places& p, int r, int n) {
  return chain_all_reduces<double>(p, r, n, DType::f64);
}

TEST(HostChain, TheRankOrderFoldOnConsecutiveHosts) {
  for (const char* hosts : {"aabb", "abb", "aabbbc", "abcd"}) expect_clean(hosts, chain_f32);
  expect_clean("aabb", chain_f64);
}

TEST(HostChain, HostsOfScatteredRanksTakeTheFlatFold) { expect_clean("abab", chain_f32); }

TEST(HostChain, LinksThatTakeLittleAtATime) {
  for (const char* hosts : {"aabb", "aabbbc"}) expect_clean(hosts, chain_f32, kSmallWindow);
}

void expect_every_collective(const std::string& hosts) {
  std::atomic<int> arrived{0};
  expect_clean(hosts, [&](const Places& p, int r, int n) { return every_collective(p, r, n, arrived); });
}

TEST(HierarchicalCollectives, TwoHostsOfTwoRanks) { expect_every_collective("aabb"); }
TEST(HierarchicalCollectives, ARankAloneOnItsHost) { expect_every_collective("abb"); }
TEST(HierarchicalCollectives, InterleavedHostsOfUnequalSize) { expect_every_collective("abaab"); }
TEST(HierarchicalCollectives, ThreeHosts) { expect_every_collective("abcabc"); }

TEST(HierarchicalCollectives, LinksThatTakeLittleAtATime) {
  for (const char* hosts : {"aabb", "abaab", "abcabc"}) {
    std::atomic<int> arrived{0};
    expect_clean(
        hosts, [&](const Places& p, int r, int n) { return every_collective(p, r, n, arrived); }, kSmallWindow);
  }
}

}  // namespace
}  // namespace mci::coll
