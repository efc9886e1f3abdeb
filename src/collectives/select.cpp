#include "collectives/select.hpp"

namespace mci::coll {

Algo select_algo(OpKind kind, std::size_t bytes, int world, Algo forced, Layout layout) {
  if (world == 1 || is_p2p(kind)) return Algo::none;
  const bool tcp_forced = forced == Algo::ring || forced == Algo::recursive_doubling || forced == Algo::tree ||
                          forced == Algo::direct;
  if (layout == Layout::hierarchical && kind == OpKind::all_reduce && !tcp_forced) return Algo::hierarchical;
  if (layout == Layout::one_host && (!tcp_forced || forced == Algo::direct)) {
    if (kind == OpKind::all_reduce || kind == OpKind::reduce) {
      return bytes <= kShmDirectBytes || forced == Algo::direct ? Algo::shm_direct : Algo::shm;
    }
    return Algo::shm;
  }
  switch (kind) {
    case OpKind::all_reduce:
      if (forced == Algo::ring || forced == Algo::recursive_doubling || forced == Algo::direct) {
        return forced;
      }
      return bytes <= kSmallAllReduceBytes ? Algo::recursive_doubling : Algo::ring;
    case OpKind::broadcast:
      return forced == Algo::direct ? Algo::direct : Algo::tree;
    case OpKind::all_gather:
      return forced == Algo::direct ? Algo::direct : Algo::ring;
    case OpKind::reduce_scatter:
      return forced == Algo::direct ? Algo::direct : Algo::ring;
    case OpKind::reduce:
      return Algo::tree;
    default:
      return Algo::none;
  }
}

}  // namespace mci::coll
