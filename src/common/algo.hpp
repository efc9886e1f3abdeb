// Algorithm identities: the number that rides in every fingerprint (so ranks
// that chose differently fail loudly) and the name users type in MCI_ALGO
// and read in messages. They live in common because the transports name
// them in mismatch errors; what each algorithm serves, where it runs and the
// function that runs it are the table in src/collectives/algorithm_table.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace mci {

// The one list of algorithms: the enum, its count, the names and the parser
// below are all made from it, so an algorithm is added here once (and its
// rows in the algorithm table). X(identifier, alias, what): the identifier
// is also the name; the alias is a short spelling MCI_ALGO also accepts;
// `what` says it in a line (docs/env.md's table says more).
// An entry's position is its number in fingerprints: ranks of one job run
// one build, so appending or inserting is equally safe.
// clang-format off
#define MCI_ALGORITHMS(X)                                                                                   \
  X(direct, "", "every rank talks to every other rank once")                                               \
  X(ring, "", "bandwidth-optimal ring (reduce-scatter + all-gather)")                                      \
  X(recursive_doubling, "rd", "log2(n) exchange rounds, latency-optimal")                                  \
  X(ordered, "", "each rank reduces its block of everyone's data in rank order (MCI_REPRODUCIBLE)")         \
  X(tree, "", "binomial tree")                                                                             \
  X(pairwise, "", "n-1 rounds, each rank swaps blocks with one peer per round")                            \
  X(dissemination, "", "log2(n) rounds of notifications")                                                  \
  X(p2p, "", "one send matched by one receive")                                                            \
  X(shm_direct, "", "shared memory: every rank reduces every staged input itself")                         \
  X(shm_sliced, "", "shared memory: rank r reduces slice r of each chunk, the others copy it")             \
  X(shm_staged, "", "shared memory: each rank stages its data, the others read what they need")            \
  X(shm_flags, "", "shared memory: one step of flags, nothing staged (barrier)")                           \
  X(hierarchical, "hier", "several hosts: shared memory inside each, TCP between their leaders")           \
  X(host_chain, "", "several hosts of consecutive ranks: the rank-ordered fold host after host (MCI_REPRODUCIBLE)") \
  X(library, "", "the backend's library (NCCL, Gloo, MPI) chooses for itself")
// clang-format on

enum class Algo : std::uint8_t {
  unset = 0,  // not chosen yet (a descriptor before Backend::prepare)
#define MCI_ALGO_ENUMERATOR(id, alias, what) id,
  MCI_ALGORITHMS(MCI_ALGO_ENUMERATOR)
#undef MCI_ALGO_ENUMERATOR
};

// Every value of Algo, unset included: the size of a table indexed by it.
inline constexpr std::size_t kAlgoCount = 1
#define MCI_ALGO_COUNT(id, alias, what) +1
    MCI_ALGORITHMS(MCI_ALGO_COUNT)
#undef MCI_ALGO_COUNT
    ;

struct AlgoName {
  Algo algo;
  std::string_view name;
  std::string_view alias;  // a short spelling MCI_ALGO also accepts, or empty
};

// Every algorithm, in enum order (unset excluded).
std::span<const AlgoName> algo_names() noexcept;
std::string_view algo_name(Algo a) noexcept;
// By name or alias; nullopt for anything else (unset included).
std::optional<Algo> algo_from_name(std::string_view s) noexcept;

}  // namespace mci
