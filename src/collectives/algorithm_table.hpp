// The algorithm table: one row per (algorithm, collective) pair mci can run,
// saying where it runs and which function runs it. Parsing MCI_ALGO, the
// selection rules, the dispatch and the help texts all read this table; a
// pairing that is not in it is an error, never a silent substitute.
//
// To add an algorithm: its line in MCI_ALGORITHMS (common/algo.hpp), its
// function in a file of its own in its family's folder, and its rows in
// algorithm_rows.hpp (plus, if it should be chosen without MCI_ALGO, a rule
// in select.cpp).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collectives/hierarchical/algorithms.hpp"
#include "collectives/mesh/algorithms.hpp"
#include "collectives/shm/algorithms.hpp"

namespace mci::coll {

// Where an algorithm runs, which is also what it needs to run.
enum class Place : std::uint8_t {
  mesh,          // over a Transport (TCP between every pair of ranks, or a loopback in tests)
  shm,           // over a ShmWorld (the shared-memory segment of one host's ranks)
  hierarchical,  // ShmWorlds inside hosts and a Transport between their leaders
  library,       // inside a backend's library; mci runs nothing itself
};
std::string_view place_name(Place p) noexcept;

struct AlgoRow {
  Algo algo;
  OpKind kind;
  Place place;
  bool forcible;                              // may be named in MCI_ALGO
  void (*on_mesh)(const Ctx&) = nullptr;      // Place::mesh
  void (*on_shm)(const ShmCtx&) = nullptr;    // Place::shm
  void (*on_hier)(const HierCtx&) = nullptr;  // Place::hierarchical
};

std::span<const AlgoRow> algorithm_table() noexcept;
// The row for (algo, kind), or nullptr.
const AlgoRow* find_algorithm(Algo algo, OpKind kind) noexcept;
Place place_of(Algo algo) noexcept;

// MCI_ALGO's value: nullopt for auto (or empty); throws ConfigError naming
// every algorithm that may be forced for anything else.
std::optional<Algo> parse_forced_algo(const std::string& value);
// "auto, direct, ring, recursive_doubling (rd), ..." with what each serves.
std::string forcible_algorithms_help();

// Everything one run may use; what the row's place needs must be set.
struct Places {
  transport::Transport* mesh = nullptr;
  transport::ShmWorld* shm = nullptr;  // nullptr when alone on this host
  const HostMap* hosts = nullptr;      // hierarchical: which rank is on which host
  Scratch* packed = nullptr;           // hierarchical: room for a host's blocks between phases
  SharedCopier* copier = nullptr;
};

// Runs d.kind with d.algo (already selected). Throws Error when the table
// has no such pairing or the place it needs is missing.
void run_algorithm(const Places& p, const CollectiveDesc& d, const Deadline& dl, Scratch& scratch);

}  // namespace mci::coll
