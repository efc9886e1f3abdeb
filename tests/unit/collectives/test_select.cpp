// Selection as a table: for each collective, size, world and layout, the
// algorithm mci chooses, and what MCI_ALGO changes. Every choice must be a
// row of the algorithm table (so dispatch can run it).
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "collectives/algorithm_table.hpp"
#include "collectives/select.hpp"
#include "mci/errors.hpp"

namespace mci::coll {
namespace {

struct SelectCase {
  OpKind kind;
  std::size_t bytes;
  int world;
  std::optional<Algo> forced;
  Layout layout;
  Algo expected;
};

constexpr std::size_t K = 1024, M = 1024 * 1024;
using enum Layout;
using K_ = OpKind;

const SelectCase kCases[] = {
    // Flat (TCP): size decides all-reduce; one algorithm per other collective.
    {K_::all_reduce, 8, 4, {}, flat, Algo::recursive_doubling},
    {K_::all_reduce, 64 * K, 4, {}, flat, Algo::recursive_doubling},
    {K_::all_reduce, 64 * K + 4, 4, {}, flat, Algo::ring},
    {K_::broadcast, 8, 4, {}, flat, Algo::tree},
    {K_::reduce, 8, 4, {}, flat, Algo::tree},
    {K_::all_gather, 8, 4, {}, flat, Algo::ring},
    {K_::reduce_scatter, 8, 4, {}, flat, Algo::ring},
    {K_::gather, 8, 4, {}, flat, Algo::direct},
    {K_::scatter, 8, 4, {}, flat, Algo::direct},
    {K_::all_to_all, 8, 4, {}, flat, Algo::pairwise},
    {K_::barrier, 0, 4, {}, flat, Algo::dissemination},
    {K_::send, 8, 4, {}, flat, Algo::p2p},
    {K_::recv, 8, 4, {}, one_host, Algo::p2p},
    // Forced where a row exists: honoured; elsewhere: the default.
    {K_::all_reduce, 8, 4, Algo::ring, flat, Algo::ring},
    {K_::all_reduce, 64 * M, 4, Algo::direct, flat, Algo::direct},
    {K_::all_gather, 8, 4, Algo::direct, flat, Algo::direct},
    {K_::gather, 8, 4, Algo::ring, flat, Algo::direct},
    {K_::broadcast, 8, 4, Algo::ring, flat, Algo::tree},
    {K_::all_reduce, 8, 4, Algo::hierarchical, flat, Algo::recursive_doubling},
    {K_::all_reduce, 8, 4, Algo::shm_sliced, flat, Algo::recursive_doubling},
    // A world of one ignores MCI_ALGO.
    {K_::all_reduce, 8, 1, Algo::ring, flat, Algo::recursive_doubling},
    // One host: shared memory, direct or sliced reduction by size.
    {K_::all_reduce, 8, 4, {}, one_host, Algo::shm_direct},
    {K_::all_reduce, 16 * K, 4, {}, one_host, Algo::shm_direct},
    {K_::all_reduce, 16 * K + 4, 4, {}, one_host, Algo::shm_sliced},
    {K_::reduce, 1 * M, 4, {}, one_host, Algo::shm_sliced},
    {K_::all_gather, 8, 4, {}, one_host, Algo::shm_staged},
    {K_::all_to_all, 8, 4, {}, one_host, Algo::shm_staged},
    {K_::barrier, 0, 4, {}, one_host, Algo::shm_flags},
    {K_::all_reduce, 8, 4, Algo::shm_sliced, one_host, Algo::shm_sliced},
    {K_::all_reduce, 1 * M, 4, Algo::shm_direct, one_host, Algo::shm_direct},
    // A mesh algorithm forced on one host takes that collective (only) off
    // shared memory.
    {K_::all_reduce, 8, 4, Algo::ring, one_host, Algo::ring},
    {K_::broadcast, 8, 4, Algo::ring, one_host, Algo::shm_staged},
    {K_::all_gather, 8, 4, Algo::direct, one_host, Algo::direct},
    // Several hosts: every collective is hierarchical unless a mesh
    // algorithm is forced for it.
    {K_::all_reduce, 8, 4, {}, hierarchical, Algo::hierarchical},
    {K_::all_reduce, 64 * M, 4, Algo::hierarchical, hierarchical, Algo::hierarchical},
    {K_::all_reduce, 64 * M, 4, Algo::ring, hierarchical, Algo::ring},
    {K_::broadcast, 8, 4, {}, hierarchical, Algo::hierarchical},
    {K_::all_to_all, 64 * 1024, 4, {}, hierarchical, Algo::hierarchical},
    {K_::all_to_all, M, 4, {}, hierarchical, Algo::pairwise},
    {K_::barrier, 0, 4, {}, hierarchical, Algo::hierarchical},
    {K_::broadcast, 8, 4, Algo::tree, hierarchical, Algo::tree},
    {K_::all_reduce, 8, 4, Algo::shm_direct, hierarchical, Algo::hierarchical},
};

TEST(Select, TableOfChoices) {
  for (const auto& c : kCases) {
    const Algo got = select_algo(c.kind, c.bytes, c.world, c.forced, c.layout);
    EXPECT_EQ(algo_name(got), algo_name(c.expected))
        << op_name(c.kind) << " " << c.bytes << " B, world " << c.world << ", forced "
        << (c.forced ? algo_name(*c.forced) : "none") << ", layout " << static_cast<int>(c.layout);
  }
}

TEST(Select, EveryChoiceIsARowOfTheTable) {
  for (auto layout : {flat, one_host, hierarchical}) {
    for (auto kind : kAllOpKinds) {
      for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, 100 * K, 64 * M}) {
        for (int world : {1, 2, 5}) {
          const Algo a = select_algo(kind, bytes, world, std::nullopt, layout);
          EXPECT_NE(find_algorithm(a, kind), nullptr) << op_name(kind) << " chose " << algo_name(a);
          for (const auto& n : algo_names()) {
            const Algo f = select_algo(kind, bytes, world, n.algo, layout);
            EXPECT_NE(find_algorithm(f, kind), nullptr)
                << op_name(kind) << " forced " << n.name << " chose " << algo_name(f);
          }
        }
      }
    }
  }
}

// Each place runs the kinds it has rows for: by default a layout's own
// place when it has a row for the kind, else the mesh (every group has
// one), for every kind of the list and every algorithm row.
TEST(Select, EachLayoutRunsAKindInItsOwnPlaceWhenItHasARowElseOnTheMesh) {
  auto has_row = [](OpKind kind, Place p) {
    for (const AlgoRow& r : algorithm_table()) {
      if (r.kind == kind && r.place == p) return true;
    }
    return false;
  };
  for (auto kind : kAllOpKinds) {
    if (is_p2p(kind)) continue;
    EXPECT_TRUE(has_row(kind, Place::mesh)) << op_name(kind) << " has no mesh row: a flat group could not run it";
    for (const auto& [layout, place] : {std::pair{flat, Place::mesh}, std::pair{one_host, Place::shm},
                                        std::pair{hierarchical, Place::hierarchical}}) {
      const Algo a = select_algo(kind, 8, 4, std::nullopt, layout);
      const Place want = has_row(kind, place) ? place : Place::mesh;
      EXPECT_EQ(place_of(a), want) << op_name(kind) << " on layout " << static_cast<int>(layout) << " chose "
                                   << algo_name(a);
    }
  }
}

TEST(AlgorithmTable, NamesParseAndUnknownNamesListTheChoices) {
  EXPECT_EQ(parse_forced_algo("rd"), Algo::recursive_doubling);
  EXPECT_EQ(parse_forced_algo("hier"), Algo::hierarchical);
  EXPECT_EQ(parse_forced_algo("shm_sliced"), Algo::shm_sliced);
  EXPECT_EQ(parse_forced_algo("auto"), std::nullopt);
  EXPECT_EQ(parse_forced_algo(""), std::nullopt);
  for (const char* bad : {"fastest", "p2p", "library", "unset", "RING"}) {
    try {
      parse_forced_algo(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("MCI_ALGO='") + bad + "' is not an algorithm"), std::string::npos) << m;
      EXPECT_NE(m.find("recursive_doubling (rd) [all_reduce]"), std::string::npos) << m;
      EXPECT_NE(m.find("tree [broadcast/reduce]"), std::string::npos) << m;
    }
  }
}

TEST(AlgorithmTable, EachPairingAppearsOnceAndHasTheFunctionOfItsPlace) {
  const auto table = algorithm_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& r = table[i];
    EXPECT_EQ(find_algorithm(r.algo, r.kind), &r) << algo_name(r.algo) << " " << op_name(r.kind) << " twice";
    EXPECT_EQ(r.on_mesh != nullptr, r.place == Place::mesh) << algo_name(r.algo);
    EXPECT_EQ(r.on_shm != nullptr, r.place == Place::shm) << algo_name(r.algo);
    EXPECT_EQ(r.on_hier != nullptr, r.place == Place::hierarchical) << algo_name(r.algo);
    EXPECT_EQ(place_of(r.algo), r.place) << algo_name(r.algo) << " runs in two places";
  }
}

TEST(AlgorithmTable, DispatchRefusesPairingsItDoesNotHave) {
  CollectiveDesc d;
  d.kind = OpKind::broadcast;
  d.algo = Algo::ring;
  Scratch scratch;
  try {
    run_algorithm(Places{}, d, Deadline(std::chrono::milliseconds(100)), scratch);
    ADD_FAILURE() << "ran a ring broadcast";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("there is no ring algorithm for broadcast"), std::string::npos) << e.what();
  }
  d.kind = OpKind::all_reduce;
  d.algo = Algo::shm_direct;
  try {
    run_algorithm(Places{}, d, Deadline(std::chrono::milliseconds(100)), scratch);
    ADD_FAILURE() << "ran shm_direct without a segment";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a shm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mci::coll
