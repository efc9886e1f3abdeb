// Hierarchical all-reduce through run_algorithm with one thread per rank and
// pretend hosts: the ranks of a host share a ShmWorld mapped in this process,
// a rank alone on its host has none, and the mesh between the leaders (the
// lowest rank of each host) is a loopback over all ranks. Results are checked
// against values computed locally (perf/check.hpp, as the collective matrix).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <latch>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/algorithm_table.hpp"
#include "collectives/select.hpp"
#include "perf/check.hpp"
#include "support/loopback_ranks.hpp"
#include "transport/loopback/loopback_transport.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::coll {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

// Small, so the larger sizes take several chunks inside a host.
constexpr std::size_t kShmBufferBytes = 64 * 1024;

struct Case {
  std::size_t count;
  ReduceOp op;
  bool in_place;
};

// Up to and above the shared-memory buffer (several chunks), across the
// direct/sliced threshold inside a host and the recursive-doubling/ring
// threshold between leaders.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{40000}, std::size_t{300007}}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      for (bool in_place : {false, true}) out.push_back(Case{count, op, in_place});
    }
  }
  return out;
}

std::string unique_name(char host) {
  static std::atomic<int> counter{0};
  return fmt::format("/mci-test-hier-{}-{}-{}", ::getpid(), host, counter++);
}

// hosts[r] names rank r's host: "aabb" is two hosts of two ranks each.
// Returns every failure, rank by rank.
std::vector<std::string> run_hosts(const std::string& hosts) {
  const int n = static_cast<int>(hosts.size());
  std::vector<int> leaders;
  std::vector<std::vector<int>> members(static_cast<std::size_t>(n));  // rank -> its host's ranks
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      if (hosts[q] == hosts[r]) members[r].push_back(q);
    }
    if (members[r].front() == r) leaders.push_back(r);
  }
  // Each host's segment is created before any rank opens it.
  std::vector<std::string> names(static_cast<std::size_t>(n));
  std::vector<std::optional<transport::ShmSegment>> created(static_cast<std::size_t>(n));
  for (int leader : leaders) {
    if (members[leader].size() < 2) continue;
    names[leader] = unique_name(hosts[leader]);
    created[leader].emplace(transport::ShmSegment::create(names[leader], static_cast<int>(members[leader].size()),
                                                          kShmBufferBytes));
  }

  std::latch mapped(n);
  std::vector<std::vector<std::string>> failures(static_cast<std::size_t>(n));
  const std::vector<std::string> errors = test::run_loopback(n, [&](transport::LoopbackTransport& mesh) {
    const int r = mesh.rank();
    const std::vector<int>& mine = members[r];
    const int size = static_cast<int>(mine.size());
    const int local = static_cast<int>(std::find(mine.begin(), mine.end(), r) - mine.begin());
    std::optional<transport::ShmWorld> host;
    bool arrived = false;
    std::string where = "setup";
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
      Scratch scratch;
      const Places places{.mesh = &mesh, .host = host ? &*host : nullptr, .leaders = &leaders, .copier = &copier};
      int round = 0;
      for (const Case& c : cases()) {
        ++round;
        where = fmt::format("all_reduce f32 x {} {}{}", c.count, reduce_op_name(c.op), c.in_place ? " in place" : "");
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
        ASSERT_EQ(d.algo, Algo::hierarchical);
        run_algorithm(places, d, Deadline(60s), scratch);
        const auto* got = static_cast<const std::uint8_t*>(d.out);
        if (bytes && std::memcmp(got, want.data(), bytes) != 0) {
          std::size_t i = 0;
          while (std::memcmp(got + 4 * i, want.data() + 4 * i, 4) == 0) ++i;
          failures[r].push_back(fmt::format("rank {} of {}: {}: element {} is {} but must be {}", r, hosts, where, i,
                                            perf::get_value(DType::f32, got, i),
                                            perf::get_value(DType::f32, want.data(), i)));
        }
        if (!c.in_place && in != keep) failures[r].push_back(fmt::format("rank {} of {}: {}: input changed", r, hosts, where));
      }
    } catch (const std::exception& e) {
      if (!arrived) mapped.count_down();
      // The others fail at once instead of at their deadline.
      mesh.abort(e.what());
      if (host) host->abort(e.what());
      throw std::runtime_error(fmt::format("rank {} of {}: {}: threw {}", r, hosts, where, e.what()));
    }
  });
  return test::flatten(failures, errors);
}

void expect_clean(const std::string& hosts) {
  const std::vector<std::string> failures = run_hosts(hosts);
  for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
}

TEST(HierarchicalAllReduce, TwoHostsOfTwoRanks) { expect_clean("aabb"); }

TEST(HierarchicalAllReduce, ARankAloneOnItsHostHasNoSharedMemory) { expect_clean("abb"); }

TEST(HierarchicalAllReduce, HostsNeedNotHoldConsecutiveRanks) { expect_clean("abab"); }

}  // namespace
}  // namespace mci::coll
