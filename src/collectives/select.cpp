#include "collectives/select.hpp"

#include <array>

#include <fmt/format.h>

#include "collectives/algorithm_table.hpp"
#include "mci/errors.hpp"

namespace mci::coll {

namespace {

// The first row of `kind` in place `p` (the table's order), or unset: each
// place runs the kinds it has rows for, and a kind that no rule below
// names (one added with its rows alone) takes its first row.
Algo first_row(OpKind kind, Place p) {
  static const auto firsts = [] {
    std::array<std::array<Algo, 4>, kOpKindCount> f{};
    for (auto& per_place : f) per_place.fill(Algo::unset);
    for (const AlgoRow& r : algorithm_table()) {
      Algo& slot = f[static_cast<std::size_t>(r.kind)][static_cast<std::size_t>(r.place)];
      if (slot == Algo::unset) slot = r.algo;
    }
    return f;
  }();
  return firsts[static_cast<std::size_t>(kind)][static_cast<std::size_t>(p)];
}

bool place_runs(Place p, OpKind kind) { return first_row(kind, p) != Algo::unset; }

bool place_exists(Place p, Layout layout) {
  switch (p) {
    case Place::mesh: return true;
    case Place::shm: return layout == Layout::one_host;
    case Place::hierarchical: return layout == Layout::hierarchical;
    case Place::library: return false;
  }
  return false;
}

Algo mesh_default(OpKind kind, std::size_t bytes) {
  switch (kind) {
    case OpKind::all_reduce: return bytes <= kSmallAllReduceBytes ? Algo::recursive_doubling : Algo::ring;
    case OpKind::broadcast: return Algo::tree;
    case OpKind::reduce: return Algo::tree;
    case OpKind::all_gather: return Algo::ring;
    case OpKind::reduce_scatter: return Algo::ring;
    case OpKind::gather: return Algo::direct;
    case OpKind::scatter: return Algo::direct;
    case OpKind::all_to_all: return Algo::pairwise;
    case OpKind::barrier: return Algo::dissemination;
    case OpKind::send:
    case OpKind::recv: return Algo::p2p;
    default: break;  // a kind without a rule: its first mesh row
  }
  return first_row(kind, Place::mesh);
}

// On one host: shared memory for the kinds it has rows for, the mesh (which
// a one-host group has too) for the others.
Algo shm_default(OpKind kind, std::size_t bytes) {
  if (!place_runs(Place::shm, kind)) return mesh_default(kind, bytes);
  switch (kind) {
    case OpKind::all_reduce:
    case OpKind::reduce: return shm_reduce_algo(bytes);
    case OpKind::barrier: return Algo::shm_flags;
    default: return first_row(kind, Place::shm);  // shm_staged for every other kind it runs
  }
}

// Across hosts: the hierarchy for the kinds it has rows for (all_to_all's
// large blocks excepted), the mesh for the others.
Algo hierarchical_default(OpKind kind, std::size_t bytes) {
  if (!place_runs(Place::hierarchical, kind)) return mesh_default(kind, bytes);
  if (kind == OpKind::all_to_all && bytes > kHierAllToAllBlockBytes) return mesh_default(kind, bytes);
  return find_algorithm(Algo::hierarchical, kind) ? Algo::hierarchical : first_row(kind, Place::hierarchical);
}

bool reduces(OpKind kind) {
  return kind == OpKind::all_reduce || kind == OpKind::reduce || kind == OpKind::reduce_scatter;
}

}  // namespace

Algo shm_reduce_algo(std::size_t bytes) { return bytes <= kShmDirectBytes ? Algo::shm_direct : Algo::shm_sliced; }

bool rank_ordered(Algo algo, OpKind kind) {
  if (!reduces(kind)) return true;
  switch (algo) {
    case Algo::direct:      // all_reduce, reduce_scatter: everyone's blocks, reduced in rank order
    case Algo::ordered:     // all_reduce, reduce
    case Algo::shm_direct:  // all_reduce, reduce
    case Algo::shm_sliced:  // all_reduce, reduce
    case Algo::shm_staged:  // reduce_scatter
    case Algo::host_chain:  // all_reduce: the fold host after host
      return true;
    default: return false;  // ring, recursive doubling and tree pair partial sums; hierarchical sums per host first
  }
}

namespace {

Algo choose(OpKind kind, std::size_t bytes, int world, std::optional<Algo> forced, Layout layout, bool reproducible) {
  if (world == 1 || is_p2p(kind)) return mesh_default(kind, bytes);
  if (forced && (!reproducible || rank_ordered(*forced, kind))) {
    const AlgoRow* row = find_algorithm(*forced, kind);
    if (row && row->forcible && place_exists(row->place, layout)) return *forced;
  }
  if (reproducible && reduces(kind)) {
    if (layout == Layout::one_host) return shm_default(kind, bytes);
    if (kind == OpKind::reduce_scatter) return Algo::direct;
    // Large all-reduces across hosts: the fold host after host, whose links
    // carry one host's worth, as the default's do (all_reduce_chain.cpp).
    if (kind == OpKind::all_reduce && layout == Layout::hierarchical && bytes > kSmallAllReduceBytes) {
      return Algo::host_chain;
    }
    // One round for small buffers (every rank reduces all of them), two
    // phases of (n-1)/n of the buffer above: the same bits either way.
    return kind == OpKind::all_reduce && bytes <= kSmallAllReduceBytes ? Algo::direct : Algo::ordered;
  }
  if (layout == Layout::hierarchical) return hierarchical_default(kind, bytes);
  if (layout == Layout::one_host) return shm_default(kind, bytes);
  return mesh_default(kind, bytes);
}

}  // namespace

Algo select_algo(OpKind kind, std::size_t bytes, int world, std::optional<Algo> forced, Layout layout,
                 bool reproducible) {
  const Algo a = choose(kind, bytes, world, forced, layout, reproducible);
  if (a == Algo::unset) {
    // A kind with no row in any place mci's engine has: said by name,
    // before any rank waits for another.
    throw ConfigError(
        fmt::format("mci's engine (the cpu backend) has no algorithm for {}: this build has no row for it in "
                    "collectives/algorithm_rows.hpp; use a backend that runs it",
                    op_name(kind)));
  }
  return a;
}

}  // namespace mci::coll
