#include "collectives/select.hpp"

#include "collectives/algorithm_table.hpp"

namespace mci::coll {

namespace {

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
  }
  return Algo::unset;
}

Algo shm_default(OpKind kind, std::size_t bytes) {
  switch (kind) {
    case OpKind::all_reduce:
    case OpKind::reduce: return shm_reduce_algo(bytes);
    case OpKind::barrier: return Algo::shm_flags;
    case OpKind::send:
    case OpKind::recv: return Algo::p2p;
    default: return Algo::shm_staged;
  }
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

Algo select_algo(OpKind kind, std::size_t bytes, int world, std::optional<Algo> forced, Layout layout,
                 bool reproducible) {
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
  if (layout == Layout::hierarchical) {
    return kind == OpKind::all_to_all && bytes > kHierAllToAllBlockBytes ? mesh_default(kind, bytes)
                                                                         : Algo::hierarchical;
  }
  if (layout == Layout::one_host) return shm_default(kind, bytes);
  return mesh_default(kind, bytes);
}

}  // namespace mci::coll
