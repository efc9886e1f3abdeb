// Algorithm identifiers. They live here because they ride in the fingerprint;
// src/collectives/select.cpp owns the choice.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mci {

enum class Algo : std::uint8_t {
  none = 0,            // the collective has a single algorithm
  direct,              // every rank talks to every other rank once
  ring,                // bandwidth-optimal ring (reduce-scatter + all-gather)
  recursive_doubling,  // log2(n) exchange rounds, latency-optimal
  tree,                // binomial tree
  shm_direct,          // shared memory: every rank reads every buffer
  shm,                 // shared memory: chunked, reduce-scatter by slices then gather
  hierarchical,        // several hosts: shared memory inside each, TCP between their leaders
};

std::string_view algo_name(Algo a) noexcept;
std::optional<Algo> parse_algo(std::string_view s) noexcept;

}  // namespace mci
