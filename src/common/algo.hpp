// Algorithm identities: the number that rides in every fingerprint (so ranks
// that chose differently fail loudly) and the name users type in MCI_ALGO
// and read in messages. They live in common because the transports name
// them in mismatch errors; what each algorithm serves, where it runs and the
// function that runs it are the table in src/collectives/algorithm_table.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace mci {

enum class Algo : std::uint8_t {
  unset = 0,           // not chosen yet (a descriptor before Backend::prepare)
  direct,              // every rank talks to every other rank once
  ring,                // bandwidth-optimal ring (reduce-scatter + all-gather)
  recursive_doubling,  // log2(n) exchange rounds, latency-optimal
  tree,                // binomial tree
  pairwise,            // n-1 rounds, each rank swaps blocks with one peer per round
  dissemination,       // log2(n) rounds of notifications
  p2p,                 // one send matched by one receive
  shm_direct,          // shared memory: every rank reduces every staged input itself
  shm_sliced,          // shared memory: rank r reduces slice r of each chunk, the others copy it
  shm_staged,          // shared memory: each rank stages its data, the others read what they need
  shm_flags,           // shared memory: one step of flags, nothing staged (barrier)
  hierarchical,        // several hosts: shared memory inside each, TCP between their leaders
  library,             // the backend's library (NCCL, Gloo) chooses for itself
};

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
